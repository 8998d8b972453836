// Writes the seed corpus of fuzz_checkpoint into the folder given (tests/fuzz/corpus/checkpoint):
// a tiny checkpoint from checkpoint::save_checkpoint, mid-epoch and older (no checksum) variants that
// load, and copies with one value edited as a hostile user would, each refused for its own
// reason -- so the fuzzer starts next to every check. Deterministic: rerunning rewrites the same
// bytes. Not built by default:
//   cmake --build build --target make_checkpoint_seeds && build/tests/fuzz/make_checkpoint_seeds
//   tests/fuzz/corpus/checkpoint
#include <cstdio>
#include <limits>
#include <string>

#include "infer/quantize.h"
#include "nn/layers.h"
#include "support/tiny_checkpoint.h"

using namespace vit;

using nlohmann::json;

namespace {

// Sets one field of the JSON held in metadata `key`.
void set_json_field(const std::string& file, const std::string& key, const std::string& field, const json& value) {
  vit::testing::edit_metadata(file, [&](json& m) {
    json j = json::parse(m[key].get<std::string>());
    j[field] = value;
    m[key] = j.dump();
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_checkpoint_seeds DIR\n");
    return 2;
  }
  const std::string dir = std::string(argv[1]) + "/seed_";
  auto fresh = [&](const std::string& name) {
    vit::testing::write_tiny_checkpoint(dir + name);
    return dir + name;
  };
  fresh("valid");
  vit::testing::write_tiny_checkpoint(
      dir + "valid_mid_epoch", [](model::VisionTransformer&, checkpoint::CheckpointInfo& i) {
        i.batch = 5;
        i.epoch_stats_json = R"({"loss_sum":9.5,"correct":40,"seen":160,"steps":4,"skipped":1,"seconds":1.5})";
      });
  vit::testing::edit_metadata(fresh("valid_no_checksum"), [](json& m) { m.erase("checksum"); });
  set_json_field(fresh("mean_1.1307"), "normalization", "mean", json::array({1.1307}));
  set_json_field(fresh("std_0"), "normalization", "std", json::array({0}));
  set_json_field(fresh("eps_1e10"), "model_config", "eps", 1e10);
  set_json_field(fresh("num_heads_1"), "model_config", "num_heads", 1);  // valid: only the checksum tells
  set_json_field(fresh("depth_2"), "model_config", "depth", 2);
  vit::testing::edit_metadata(fresh("class_names_repeated"), [](json& m) { m["class_names"] = R"(["0","0","2"])"; });
  vit::testing::edit_metadata(fresh("epoch_negative"), [](json& m) { m["epoch"] = "-1"; });
  vit::testing::edit_metadata(fresh("batch_without_stats"), [](json& m) { m["batch"] = "3"; });
  vit::testing::edit_metadata(fresh("checksum_malformed"), [](json& m) { m["checksum"] = "xxh64:zz"; });
  vit::testing::write_tiny_checkpoint(dir + "nan_weight", [](model::VisionTransformer& m, checkpoint::CheckpointInfo&) {
    m.state_dict().front().second.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  });
  std::string bytes = vit::testing::read_text_file(fresh("flipped_data_byte"));
  bytes[vit::testing::data_offset(dir + "flipped_data_byte") + 7] ^= 0x40;
  vit::testing::write_text_file(dir + "flipped_data_byte", bytes);
  // int8 models (vit quantize): one that loads, then a value that could saturate the kernel and a
  // NaN scale (both refused by name).
  const auto int8 = [](model::VisionTransformer& m, checkpoint::CheckpointInfo&) { infer::quantize_linears(m); };
  vit::testing::write_tiny_checkpoint(dir + "int8_valid", int8);
  vit::testing::write_tiny_checkpoint(dir + "int8_value_-128",
                                      [&](model::VisionTransformer& m, checkpoint::CheckpointInfo& i) {
                                        int8(m, i);
                                        m.head->weight.data().data<int8_t>()[0] = -128;
                                      });
  vit::testing::write_tiny_checkpoint(dir + "int8_scale_nan",
                                      [&](model::VisionTransformer& m, checkpoint::CheckpointInfo& i) {
                                        int8(m, i);
                                        m.head->weight_scale.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
                                      });
  std::printf("wrote the seeds into %s\n", argv[1]);
  return 0;
}
