// Renaming a foreign checkpoint by a source's table of rules, stacking Hugging Face's separate
// q, k and v into timm's qkv (see layouts/sources.h).
#include <fmt/ranges.h>

#include <array>
#include <map>

#include "core/check.h"
#include "core/printable.h"
#include "model/layouts/sources.h"

namespace vit::model::layouts {

bool has_prefix(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

const Tensor* find(const NamedTensors& tensors, const std::string& key) {
  for (const auto& [name, t] : tensors) {
    if (name == key) return &t;
  }
  return nullptr;
}

Tensor* find(NamedTensors& tensors, const std::string& key) {
  for (auto& [name, t] : tensors) {
    if (name == key) return &t;
  }
  return nullptr;
}

std::vector<Rule> rules_from(const std::vector<KeyNames>& table, Layout layout) {
  std::vector<Rule> rules;
  for (const KeyNames& k : table) {
    const char* foreign = layout == Layout::Torchvision ? k.torchvision : k.huggingface;
    if (foreign != nullptr) rules.push_back({foreign, k.timm});
  }
  return rules;
}

namespace {

const Rule* lookup(const std::vector<Rule>& rules, const std::string& key) {
  for (const Rule& r : rules) {
    if (r.foreign == key) return &r;
  }
  return nullptr;
}

constexpr std::array<const char*, 3> kPieces = {"query", "key", "value"};

// The q, k and v pieces of one stacked tensor, with the file's key of each.
struct Pieces {
  std::array<Tensor, 3> tensors;
  std::array<std::string, 3> keys;
};

// Stacks one block's q, k, v pieces of `timm` (blocks.{i}.attn.qkv.weight or .bias) into `out`.
void stack(const Pieces& p, int64_t block, const std::string& timm, const std::string& source, Converted& out) {
  const std::string kind = timm.substr(timm.rfind('.') + 1);  // weight or bias
  for (size_t i = 0; i < kPieces.size(); ++i) {
    VIT_CHECK(!p.keys[i].empty(), "checkpoint", "{}: block {} has attention q/k/v {} but no '{}.{}'", source, block,
              kind, kPieces[i], kind);
  }
  const std::string qkv_name = fmt::format("blocks.{}.{}", block, timm);
  const Tensor& first = p.tensors[0];
  for (size_t i = 0; i < kPieces.size(); ++i) {
    const Tensor& part = p.tensors[i];
    VIT_CHECK(part.dim() == first.dim() && (part.dim() < 2 || part.size(1) == first.size(1)), "checkpoint",
              "{}: '{}' {} does not fit '{}' {} (q, k and v are stacked into {})", source, printable(p.keys[i]),
              shape_str(part.shape()), printable(p.keys[0]), shape_str(first.shape()), qkv_name);
  }
  out.weights.emplace_back(qkv_name, cat({p.tensors[0], p.tensors[1], p.tensors[2]}, 0));  // (3 x rows, ...)
  out.source_keys[qkv_name] = fmt::format("{}", fmt::join(p.keys, " + "));                 // printable() where quoted
}

}  // namespace

void rename(const NamedTensors& tensors, const Rules& rules, Layout layout, const std::string& source, Converted& out) {
  std::map<int64_t, std::map<std::string, Pieces>> pieces;  // block -> timm name -> its q, k, v
  for (const auto& [name, t] : tensors) {
    if (is_ignored_key(name, layout)) {
      out.ignored.push_back(name);
      continue;
    }
    std::string key = name;
    for (const std::string& prefix : rules.prefixes) {
      if (has_prefix(key, prefix)) {
        key = key.substr(prefix.size());
        break;
      }
    }
    std::string mapped;
    std::smatch m;
    if (const Rule* r = lookup(rules.top, key)) {
      mapped = r->timm;
    } else if (std::regex_match(key, m, rules.block)) {
      if (const Rule* b = lookup(rules.block_rules, m[2].str())) {
        const int64_t block = std::stoll(m[1].str());
        if (b->piece >= 0) {
          Pieces& p = pieces[block][b->timm];
          p.tensors[static_cast<size_t>(b->piece)] = t;
          p.keys[static_cast<size_t>(b->piece)] = name;
          continue;
        }
        mapped = fmt::format("blocks.{}.{}", block, b->timm);
      }
    }
    if (mapped.empty()) {
      out.unused.push_back(name);
    } else {
      out.weights.emplace_back(mapped, t);
      out.source_keys[mapped] = name;
    }
  }
  // Block by block, in the order of the rules (weight before bias).
  for (const auto& [block, stacked] : pieces) {
    for (const Rule& r : rules.block_rules) {
      if (r.piece != 0) continue;
      if (const auto it = stacked.find(r.timm); it != stacked.end()) stack(it->second, block, r.timm, source, out);
    }
  }
}

}  // namespace vit::model::layouts
