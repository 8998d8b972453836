// torchvision's layout (one source: torchvision.models.vit_*): class_token, conv_proj,
// encoder.layers.encoder_layer_{i}.*, heads.head, renamed by the torchvision column of
// top_level_keys() / block_keys(), plus the MLP's older linear_1 / linear_2 names.
#include <fmt/format.h>

#include "model/layouts/sources.h"

namespace vit::model::layouts {
namespace {

const Rules& torchvision_rules() {
  static const Rules rules = [] {
    Rules r;
    r.top = rules_from(top_level_keys(), Layout::Torchvision);
    r.block = std::regex(R"(encoder\.layers\.encoder_layer_(\d+)\.(.+))");
    r.block_rules = rules_from(block_keys(), Layout::Torchvision);
    // Older torchvision releases name the MLP's two Linear layers linear_1 / linear_2.
    for (const char* param : {"weight", "bias"}) {
      r.block_rules.push_back({fmt::format("mlp.linear_1.{}", param), fmt::format("mlp.fc1.{}", param)});
      r.block_rules.push_back({fmt::format("mlp.linear_2.{}", param), fmt::format("mlp.fc2.{}", param)});
    }
    return r;
  }();
  return rules;
}

Converted convert_torchvision(const NamedTensors& tensors, const std::string& source) {
  Converted out;
  rename(tensors, torchvision_rules(), Layout::Torchvision, source, out);
  return out;
}

}  // namespace

const std::vector<Source>& torchvision_sources() {
  static const std::vector<Source> sources = {
      {"torchvision vit", Layout::Torchvision, nullptr, convert_torchvision},
  };
  return sources;
}

}  // namespace vit::model::layouts
