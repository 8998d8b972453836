// The converters of foreign checkpoints, one per source (inside the model room; the public face
// is layout.h's to_timm). A source is a layout and the model family its marker keys
// tell (timm's checkpoint_filter_fn picks _convert_openai_clip / _convert_dinov2 so): to_timm
// picks one source once, by its markers, and that source's converter renames the keys into
// timm's, with a table of rules where renaming is all it takes (rename.cpp applies the tables).
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "model/layouts/layout.h"

namespace vit::model::layouts {

bool has_prefix(const std::string& s, const std::string& prefix);
const Tensor* find(const NamedTensors& tensors, const std::string& key);
Tensor* find(NamedTensors& tensors, const std::string& key);

// One source: its layout, its marker test (nullptr: the layout's fallback, which takes any file
// of the layout) and its converter. Each layout lists its sources in the order they are tried.
struct Source {
  const char* name;  // e.g. "huggingface dinov2"
  Layout layout;
  bool (*marked)(const NamedTensors& tensors);
  Converted (*convert)(const NamedTensors& tensors, const std::string& source);
};
const std::vector<Source>& timm_sources();         // timm.cpp
const std::vector<Source>& torchvision_sources();  // torchvision.cpp
const std::vector<Source>& huggingface_sources();  // huggingface.cpp
const std::vector<Source>& jax_sources();          // jax.cpp

// A renaming rule: the file's key (relative to the block for a block rule) and timm's. piece 0, 1,
// 2: the query, key or value part of timm's stacked tensor (Hugging Face keeps q, k, v apart).
struct Rule {
  std::string foreign;
  std::string timm;
  int piece = -1;
};
// The rules of one source. Keys with one of `prefixes` (a model's prefix such as "vit.") lose it
// first; then a key is looked up in `top`, else matched by `block` (two groups: the block index
// and the rest of the key) and its rest looked up in `block_rules` (timm's "blocks.{i}." added).
struct Rules {
  std::vector<std::string> prefixes;
  std::vector<Rule> top;
  std::regex block;
  std::vector<Rule> block_rules;
};
// The rules from one foreign column of a KeyNames table (top_level_keys(), block_keys()).
std::vector<Rule> rules_from(const std::vector<KeyNames>& table, Layout layout);

// Renames `tensors` by `rules` into out.weights / out.source_keys; keys no rule names go to
// out.unused, keys is_ignored_key(layout) knows to out.ignored. q, k and v pieces are stacked (in
// that order, along rows) once the file is read; a block with some but not all of them, or with
// pieces of different widths, is refused naming the file's keys.
void rename(const NamedTensors& tensors, const Rules& rules, Layout layout, const std::string& source, Converted& out);

}  // namespace vit::model::layouts
