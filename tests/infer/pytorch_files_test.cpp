// The checkpoints people download that are not safetensors (io/weights_file.h): torch.save files
// (.pth, pytorch_model.bin) and JAX .npz archives, made by tools/golden/make_golden_pth.py with PyTorch
// and numpy from the same tiny ViT as tests/golden/layouts/. Each gives the logits PyTorch gives
// (within 1e-5 of the largest) and exactly the logits of its safetensors twin; training
// checkpoints give up their state dict (and EMA with --ema) without anything else being run; and
// every hostile file is refused naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "infer/load_model.h"
#include "io/safetensors.h"
#include "io/weights_file.h"
#include "nn/module.h"
#include "support/golden.h"

namespace vit::infer {
namespace {

const std::string kDir = std::string(VIT_GOLDEN_DIR) + "/pth/";
const std::string kLayouts = std::string(VIT_GOLDEN_DIR) + "/layouts/";
constexpr double kTol = 1e-5;  // of the largest logit: the PyTorch parity target

LoadSettings heads4(WeightSet weights = WeightSet::Recorded) {
  LoadSettings o;
  o.num_heads = 4;  // 48 wide is no standard width
  o.weights = weights;
  return o;
}

Tensor logits(const std::string& path, const LoadSettings& options = heads4()) {
  LoadedModel m = load_model(path, options);
  const io::WeightsFile expected = io::load_safetensors(kDir + "expected.safetensors");
  NoGradGuard no_grad;
  return (*m.model)(Variable(expected.get("input").to(DType::F32))).data().contiguous();
}

void expect_close(const Tensor& ours, const Tensor& theirs, const std::string& what) {
  double top = 0.0;
  for (double v : theirs.to_vector()) top = std::max(top, std::fabs(v));
  EXPECT_GT(top, 0.1) << what << ": the reference logits are all near zero";
  EXPECT_TRUE(testing::close_to_largest(ours, theirs, kTol, what));
}

void expect_identical(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  EXPECT_EQ(a.to_vector(), b.to_vector()) << what << ": not bit-identical to its safetensors twin";
}

struct Case {
  std::string file, reference, twin;  // twin: the safetensors file with the same weights ("" if none)
};

class PyTorchFiles : public ::testing::TestWithParam<Case> {};

TEST_P(PyTorchFiles, MatchPyTorchAndTheirSafetensorsTwin) {
  const Case& c = GetParam();
  const io::WeightsFile expected = io::load_safetensors(kDir + "expected.safetensors");
  const Tensor ours = logits(kDir + c.file);
  expect_close(ours, expected.get(c.reference), c.file);
  if (!c.twin.empty()) expect_identical(ours, logits(kLayouts + c.twin), c.file);
}

INSTANTIATE_TEST_SUITE_P(Files, PyTorchFiles,
                         ::testing::Values(Case{"torchvision.pth", "logits_torchvision", "torchvision.safetensors"},
                                           Case{"timm_train.pth", "logits_timm", "timm.safetensors"},
                                           Case{"ddp.pth", "logits_timm", "timm.safetensors"},
                                           Case{"model_key.pth", "logits_timm", "timm.safetensors"},
                                           Case{"pytorch_model.bin", "logits_hf", "hf.safetensors"},
                                           Case{"views.pth", "logits_timm", "timm.safetensors"},
                                           Case{"f16.pth", "logits_f16", "timm_f16.safetensors"},
                                           Case{"bf16.pth", "logits_bf16", "timm_bf16.safetensors"},
                                           Case{"jax.npz", "logits_timm", "timm.safetensors"},
                                           Case{"jax_compressed.npz", "logits_timm", "timm.safetensors"},
                                           Case{"jax_prelogits.npz", "logits_prelogits", ""},
                                           Case{"jax_bigvision.npz", "logits_bigvision", ""}),
                         [](const auto& param_info) {
                           std::string n = param_info.param.file;
                           for (char& ch : n) {
                             if (ch == '.') ch = '_';
                           }
                           return n;
                         });

TEST(PyTorchFiles, TrainingCheckpointsGiveUpTheirStateDictOnly) {
  const LoadedModel m = load_model(kDir + "timm_train.pth", heads4());
  EXPECT_EQ(m.layout, "timm");
  EXPECT_EQ(m.format, io::WeightsFormat::TorchZip);
  for (const char* skipped : {"epoch (int)", "args (argparse.Namespace, never run)", "optimizer (dict of 2)",
                              "metric (float)", "arch (str)"}) {
    EXPECT_NE(m.source_note.find(skipped), std::string::npos) << m.source_note;
  }
  EXPECT_NE(m.source_note.find("state dict 'model'"), std::string::npos) << m.source_note;
  // A float32 state dict is borrowed from the file mapping, not copied.
  for (const auto& [name, p] : m.model->named_parameters()) {
    if (name == "blocks.0.attn.qkv.weight") {
      EXPECT_TRUE(p.data().is_file_mapped()) << name;
    }
  }
}

TEST(PyTorchFiles, DdpPrefixAndEmaStateDict) {
  const LoadedModel raw = load_model(kDir + "ddp.pth", heads4());
  EXPECT_NE(raw.source_note.find("without their 'module.' prefix"), std::string::npos) << raw.source_note;
  EXPECT_NE(raw.weights_note.find("--ema: the EMA state dict 'state_dict_ema'"), std::string::npos) << raw.weights_note;
  EXPECT_FALSE(raw.ema);
  const io::WeightsFile expected = io::load_safetensors(kDir + "expected.safetensors");
  expect_close(logits(kDir + "ddp.pth", heads4(WeightSet::Ema)), expected.get("logits_ema"), "ddp.pth --ema");
  const LoadedModel ema = load_model(kDir + "ddp.pth", heads4(WeightSet::Ema));
  EXPECT_TRUE(ema.ema);
  // A file without an EMA state dict refuses --ema.
  try {
    load_model(kDir + "timm_train.pth", heads4(WeightSet::Ema));
    ADD_FAILURE() << "--ema on a file without EMA weights loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this PyTorch (torch.save) file has none"), std::string::npos) << e.what();
  }
}

TEST(PyTorchFiles, JaxNamesTellTheHeadCountAndTheLayout) {
  LoadSettings no_heads;  // the query kernel (D, heads, head_dim) says 4
  const LoadedModel m = load_model(kDir + "jax.npz", no_heads);
  EXPECT_EQ(m.layout, "jax");
  EXPECT_EQ(m.format, io::WeightsFormat::Npz);
  EXPECT_EQ(m.model->config().num_heads, 4);
  const LoadedModel pre = load_model(kDir + "jax_prelogits.npz", no_heads);
  EXPECT_EQ(pre.model->config().representation_size, 48);
  const LoadedModel bv = load_model(kDir + "jax_bigvision.npz", no_heads);
  EXPECT_TRUE(bv.model->config().no_embed_class);
}

struct Hostile {
  std::string file, message;
};

class HostileFiles : public ::testing::TestWithParam<Hostile> {};

TEST_P(HostileFiles, AreRefusedNamingWhatIsWrong) {
  const Hostile& h = GetParam();
  try {
    load_model(kDir + "hostile/" + h.file, heads4());
    ADD_FAILURE() << h.file << " loaded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(h.message), std::string::npos) << h.file << ": " << what;
    EXPECT_NE(what.find(h.file), std::string::npos) << "the message names the file: " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, HostileFiles,
    ::testing::Values(
        Hostile{"os_system.pth", "global 'posix.system' is refused"},
        Hostile{"builtins_eval.pth", "global 'builtins.eval' is refused"},
        Hostile{"subprocess_popen.pth", "global 'subprocess.Popen' is refused"},
        Hostile{"unknown_reduce.pth", "global 'mymodule.Evil' is refused"},
        Hostile{"memo_out_of_range.pth", "was never stored"}, Hostile{"truncated_pickle.pth", "truncated"},
        Hostile{"nesting_bomb.pth", "1000"}, Hostile{"storage_too_big.pth", "but its entry holds"},
        Hostile{"offset_past_end.pth", "-element storage"}, Hostile{"legacy.pth", "legacy format"},
        Hostile{"torchscript.pt", "TorchScript archive"}, Hostile{"npz_bomb_declared.npz", "a zip bomb?"},
        Hostile{"npz_bomb_lying.npz", "inflates to more than"}, Hostile{"dotdot.npz", "'..' path component"},
        Hostile{"duplicate.npz", "appears twice"}, Hostile{"duplicate.pth", "appears twice"},
        Hostile{"truncated_cd.npz", "[zip]"}, Hostile{"not_a_state_dict.pth", "no state dict"},
        Hostile{"unknown_newobj.pth", "global 'mymodule.Evil' is refused"},
        Hostile{"storage_huge_numel.pth", "but its entry holds"}, Hostile{"bad_crc.pth", "CRC-32 mismatch"},
        Hostile{"bad_crc.npz", "CRC-32 mismatch"}, Hostile{"truncated_cd_eocd.npz", "[zip]"}),
    [](const auto& param_info) {
      std::string n = param_info.param.file;
      for (char& ch : n) {
        if (ch == '.') ch = '_';
      }
      return n;
    });

}  // namespace
}  // namespace vit::infer
