// Foreign weights files made hostile by the test (support/torch_files.h): weights that share one
// storage still load as parameters of their own (fine-tuning one never changes another), and a
// file of 100k unexpected keys, some of them escape sequences, gives one short error line that
// shows its names escaped.
#include <gtest/gtest.h>

#include <cstring>

#include "infer/load_model.h"
#include "io/safetensors.h"
#include "io/weights_file.h"
#include "nn/module.h"
#include "support/errors.h"
#include "support/files.h"
#include "support/torch_files.h"

namespace vit::infer {
namespace {

const std::string kTimm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";

LoadSettings heads4() {
  LoadSettings o;
  o.num_heads = 4;  // 48 wide is no standard width
  return o;
}

TEST(HostileWeights, WeightsSharingAStorageBecomeParametersOfTheirOwn) {
  // timm.safetensors as a torch.save file where norm.weight and norm.bias view one storage (as
  // torch.save keeps tensors that were views of one another).
  const io::WeightsFile timm = io::load_safetensors(kTimm);
  std::vector<testing::TorchStorage> storages;
  std::vector<testing::TorchTensor> tensors;
  for (const auto& [name, t] : timm.tensors) {
    const Tensor c = t.to(DType::F32).contiguous();
    const std::string bytes(static_cast<const char*>(c.raw_data()), static_cast<size_t>(c.numel()) * 4);
    const std::string key = name == "norm.bias" ? "norm" : std::to_string(storages.size());
    if (name != "norm.bias") storages.push_back({name == "norm.weight" ? "norm" : key, "FloatStorage", bytes});
    tensors.push_back({name, name.rfind("norm.", 0) == 0 ? "norm" : key, 0, c.shape(), contiguous_strides(c.shape())});
  }
  testing::TempDir dir;
  const std::string bytes =
      testing::zip_bytes(testing::torch_members(testing::state_dict_pickle(tensors, storages), storages));
  testing::write_bytes(dir.file("shared.pth"), std::vector<uint8_t>(bytes.begin(), bytes.end()));
  const io::WeightsFile file = io::load_weights_file(dir.file("shared.pth"));
  EXPECT_TRUE(file.get("norm.weight").shares_storage(file.get("norm.bias")));  // as torch.load gives them
  const LoadedModel m = load_model(dir.file("shared.pth"), heads4());
  Tensor weight, bias;
  for (const auto& [name, p] : m.model->named_parameters()) {
    if (name == "norm.weight") weight = p.data();
    if (name == "norm.bias") bias = p.data();
  }
  ASSERT_TRUE(weight.defined() && bias.defined());
  EXPECT_FALSE(weight.shares_storage(bias)) << "two parameters alias one storage";
  const double before = bias.at({0});
  weight.fill_(123.0);
  EXPECT_EQ(bias.at({0}), before);
}

TEST(HostileWeights, AHundredThousandUnexpectedKeysGiveOneShortLine) {
  io::WeightsFile timm = io::load_safetensors(kTimm);
  io::NamedTensors tensors = timm.tensors;
  tensors.emplace_back("evil\x1b]0;pwned\x07\r\n", Tensor::zeros({1}));
  for (int i = 0; i < 100000; ++i) tensors.emplace_back("extra." + std::to_string(i), Tensor::zeros({1}));
  testing::TempDir dir;
  io::save_safetensors(dir.file("extra.safetensors"), tensors);
  const std::string e = testing::error_of([&] { load_model(dir.file("extra.safetensors"), heads4()); });
  EXPECT_LT(e.size(), 2000u) << e.substr(0, 2000);
  EXPECT_NE(e.find("evil\\x1B]0;pwned\\x07\\x0D\\x0A"), std::string::npos) << e.substr(0, 2000);
  EXPECT_NE(e.find("... and 99991 more"), std::string::npos) << e.substr(0, 2000);
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace vit::infer
