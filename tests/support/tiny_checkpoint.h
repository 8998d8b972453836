// A tiny vit checkpoint written by checkpoint::save_checkpoint (28x28 grey images, 10 classes, width
// 16, 4 heads, one block, MNIST's normalisation), and the edits a hostile user makes to such a
// file: bytes replaced in place (same length, so the header length stays right) or the header's
// metadata rewritten (valid JSON, the header length updated). For the checkpoint-validation tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint.h"
#include "support/files.h"

namespace vit::testing {

inline model::ViTConfig tiny_checkpoint_config() {
  model::ViTConfig c;
  c.name = "tiny";
  c.image_size = 28;
  c.patch_size = 7;
  c.in_channels = 1;
  c.num_classes = 10;
  c.dim = 16;
  c.depth = 1;
  c.num_heads = 4;
  c.mlp_ratio = 2.0;
  c.pool = "mean";
  return c;
}

inline checkpoint::CheckpointInfo tiny_checkpoint_info() {
  checkpoint::CheckpointInfo info;
  info.model = tiny_checkpoint_config();
  info.train_config_json = R"({"epochs":3})";
  info.epoch = 2;
  info.step = 40;
  info.elapsed_seconds = 12.5;
  for (int k = 0; k < 10; ++k) info.class_names.push_back(std::to_string(k));
  info.normalization = {{0.1307}, {0.3081}};
  return info;
}

// Writes the checkpoint; `edit` may change the model's weights or the info first.
inline void write_tiny_checkpoint(
    const std::string& path,
    const std::function<void(model::VisionTransformer&, checkpoint::CheckpointInfo&)>& edit = {}) {
  checkpoint::CheckpointInfo info = tiny_checkpoint_info();
  model::VisionTransformer model(info.model, std::make_shared<Generator>(7));
  if (edit) edit(model, info);
  checkpoint::save_checkpoint(path, model, info);
}

// An RGB 32-px, 2-class (c0, c1) checkpoint whose recorded evaluation transform is not a squash:
// the shorter side resized to 36, a centre crop of 32, bicubic (as a timm file's would be).
inline void write_transform_checkpoint(const std::string& path) {
  checkpoint::CheckpointInfo info = tiny_checkpoint_info();
  info.model.image_size = 32;
  info.model.patch_size = 8;
  info.model.in_channels = 3;
  info.model.num_classes = 2;
  info.class_names = {"c0", "c1"};
  info.normalization = {{0.45, 0.5, 0.55}, {0.2, 0.25, 0.3}};
  nlohmann::json pre = {{"resize", 36},
                        {"square", false},
                        {"crop", 32},
                        {"filter", "bicubic"},
                        {"mean", info.normalization.mean},
                        {"std", info.normalization.std}};
  info.preprocess_json = pre.dump();
  const model::VisionTransformer model(info.model, std::make_shared<Generator>(11));
  checkpoint::save_checkpoint(path, model, info);
}

inline std::string read_text_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

inline void write_text_file(const std::string& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// Replaces the one occurrence of `from` in the file by `to` (same length). Fails the test when
// `from` is not there exactly once.
inline void replace_in_file(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size()) << from << " -> " << to;
  std::string text = read_text_file(path);
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << "'" << from << "' not in " << path;
  ASSERT_EQ(text.find(from, at + 1), std::string::npos) << "'" << from << "' more than once in " << path;
  text.replace(at, from.size(), to);
  write_text_file(path, text);
}

// Rewrites the header with `edit` applied to its __metadata__ object (the data is kept as is).
inline void edit_metadata(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  const std::string text = read_text_file(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, text.data(), 8);
  nlohmann::json header = nlohmann::json::parse(text.substr(8, header_len));
  edit(header["__metadata__"]);
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t new_len = json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &new_len, 8);
  write_text_file(path, out + json + text.substr(8 + header_len));
}

// The byte offset of the data section in a safetensors file.
inline size_t data_offset(const std::string& path) {
  const std::string text = read_text_file(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, text.data(), 8);
  return 8 + header_len;
}

}  // namespace vit::testing
