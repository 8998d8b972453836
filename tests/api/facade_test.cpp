// <vit/vit.h> as a library user calls it (linked against libvit.so): a moved-from Model throws
// vit::Error instead of crashing, sized calls check the array's shape, non-finite logits and
// negative batches are refused, options are checked with readable numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "vit/vit.h"

namespace {

const std::string kTimm = std::string(VIT_GOLDEN_DIR) + "/layouts/timm.safetensors";  // 3x32x32, 10 classes

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const vit::Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::function<void()>& fn, const std::string& message) {
  const std::string what = error_of(fn);
  EXPECT_NE(what.find(message), std::string::npos) << what << "\n  wanted: " << message;
}

TEST(Facade, AMovedFromModelThrowsInsteadOfCrashing) {
  vit::Model model = vit::Model::load(kTimm, {.heads = 4});
  vit::Model other = std::move(model);
  EXPECT_EQ(other.num_classes(), 10);
  const std::vector<float> x(3 * 32 * 32, 0.5f);
  const std::string moved = "[model] this vit::Model was moved from";
  expect_error([&] { model.predict(x.data(), 1); }, moved);  // NOLINT(bugprone-use-after-move): the point
  expect_error([&] { model.embed(x.data(), 1); }, moved);
  expect_error([&] { model.embed_shape(1); }, moved);
  expect_error([&] { model.top_k(std::vector<float>(10), 1); }, moved);
  expect_error([&] { model.image_size(); }, moved);
  expect_error([&] { model.class_names(); }, moved);
  expect_error([&] { model.layout(); }, moved);
  expect_error([&] { model.load_image("x.png"); }, moved);
  expect_error([&] { model.config_json(); }, moved);
}

TEST(Facade, LoadsPyTorchAndJaxFilesLikeSafetensors) {
  const std::string pth = std::string(VIT_GOLDEN_DIR) + "/pth/";
  const std::vector<float> x(2 * 3 * 32 * 32, 0.25f);
  const std::vector<float> twin = vit::Model::load(kTimm, {.heads = 4}).predict(x.data(), 2);
  EXPECT_EQ(vit::Model::load(pth + "timm_train.pth", {.heads = 4}).predict(x.data(), 2), twin);
  const vit::Model jax = vit::Model::load(pth + "jax.npz");
  EXPECT_EQ(jax.layout(), "jax");
  EXPECT_EQ(jax.predict(x.data(), 2), twin);
  EXPECT_NE(vit::Model::load(pth + "ddp.pth", {.heads = 4, .ema = true}).predict(x.data(), 2), twin);
  expect_error([&] { vit::Model::load(pth + "hostile/subprocess_popen.pth", {.heads = 4}); },
               "global 'subprocess.Popen' is refused");
}

TEST(Facade, ExportsOnnxThatLoadsBackAndReadsTorchExports) {
  const std::string dir = std::filesystem::temp_directory_path() / ("vit_facade_onnx_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const vit::ExportReport r = vit::export_onnx(kTimm, dir + "/m.onnx", {.heads = 4});
  EXPECT_EQ(r.outputs, (std::vector<std::string>{"logits", "embedding"}));
  EXPECT_EQ(r.precision, "float32");
  const std::vector<float> x(2 * 3 * 32 * 32, 0.25f);
  EXPECT_EQ(vit::Model::load(dir + "/m.onnx").predict(x.data(), 2),
            vit::Model::load(kTimm, {.heads = 4}).predict(x.data(), 2));
  expect_error([&] { vit::export_onnx(kTimm, dir + "/m.onnx", {.heads = 4}); }, "[export] out");
  expect_error([&] { vit::export_onnx(kTimm, dir + "/q.onnx", {.heads = 4}, 17, "fp16"); },
               "precision must be float32 or int8, got 'fp16'");
  EXPECT_EQ(vit::export_onnx(kTimm, dir + "/q.onnx", {.heads = 4}, 16, "int8").precision, "int8");
  const vit::Model torchvision = vit::Model::load(std::string(VIT_GOLDEN_DIR) + "/onnx/torchvision_op14.onnx");
  EXPECT_EQ(torchvision.layout(), "torchvision");
  EXPECT_EQ(torchvision.num_classes(), 10);
  std::filesystem::remove_all(dir);
}

TEST(Facade, SizedCallsCheckTheShapeAndValuesAreChecked) {
  const vit::Model model = vit::Model::load(kTimm, {.heads = 4});
  const std::vector<float> x(2 * 3 * 32 * 32, 0.25f);
  const std::vector<float> by_pointer = model.predict(x.data(), 2);
  EXPECT_EQ(model.predict(x, {2, 3, 32, 32}), by_pointer);
  expect_error(
      [&] {
        model.predict(x, {2, 3, 16, 64});
      },
      "[predict] input (2, 3, 16, 64) but the model takes (B, 3, 32, 32)");
  expect_error(
      [&] {
        model.predict(x, {3, 3, 32, 32});
      },
      "[predict] 6144 values given for an input of shape (3, 3, 32, 32)");
  expect_error(
      [&] {
        model.embed(x.data(), {2, 3, 32});
      },
      "[embed] input (2, 3, 32) but the model takes (B, 3, 32, 32)");
  expect_error([&] { model.embed_shape(-3); }, "[embed] batch must be >= 0, got -3");
  std::vector<float> logits = by_pointer;
  logits[3] = std::numeric_limits<float>::infinity();
  expect_error([&] { model.top_k(logits, 2); }, "[top_k] the logits contains NaN or infinity (element 3 of 20)");
  expect_error([&] { model.top_k(std::vector<float>(7), 2); },
               "[top_k] 7 logits are not rows of the model's 10 classes");
  EXPECT_EQ(model.top_k(by_pointer, 3).size(), 2u);
}

TEST(Facade, LoadOptionsAreCheckedWithReadableNumbers) {
  expect_error([] { vit::Model::load(kTimm, {.heads = 4, .eps = std::nan("")}); },
               "[load] eps must be a positive number (0: the file's), got nan");
  expect_error([] { vit::Model::load(""); }, "[load] no path given");
  expect_error(
      [] {
        vit::Model::load(kTimm, {.heads = 4, .std = {0.5, 0.5}});
      },
      "[preprocess] --std needs 1 or 3 values");
  const vit::Model cropped = vit::Model::load(kTimm, {.heads = 4, .resize = 40, .crop = 32});
  EXPECT_EQ(cropped.image_size(), 32);
}

TEST(Facade, SetNumThreadsZeroMeansEveryCore) {
  vit::set_num_threads(1);
  EXPECT_EQ(vit::num_threads(), 1);
  vit::set_num_threads(0);
  EXPECT_GE(vit::num_threads(), 1);
  EXPECT_EQ(vit::num_threads(), static_cast<int>(std::thread::hardware_concurrency()));
  expect_error([] { vit::set_num_threads(-2); }, "[threads] the number of threads must be >= 0");
}

// IDX files of `n` grey size x size images (label i % 10) for train and t10k.
void write_idx_digits(const std::string& dir, int64_t n, int64_t size) {
  std::filesystem::create_directories(dir);
  auto be = [](std::string& out, uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
  };
  for (const char* split : {"train", "t10k"}) {
    std::string images, labels;
    be(images, 2051);
    be(images, static_cast<uint32_t>(n));
    be(images, static_cast<uint32_t>(size));
    be(images, static_cast<uint32_t>(size));
    be(labels, 2049);
    be(labels, static_cast<uint32_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t p = 0; p < size * size; ++p)
        images.push_back(static_cast<char>((p / size) % (i % 10 + 2) ? 20 : 220));
      labels.push_back(static_cast<char>(i % 10));
    }
    std::ofstream(dir + "/" + split + "-images-idx3-ubyte", std::ios::binary) << images;
    std::ofstream(dir + "/" + split + "-labels-idx1-ubyte", std::ios::binary) << labels;
  }
}

// Fine-tuning through the facade: a foreign timm file (RGB, 10 classes) on grey digits.
TEST(Facade, TrainModelFineTunesAForeignFileFromInit) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("vit_facade_init_" + std::to_string(::getpid()))).string();
  write_idx_digits(dir + "/data", 40, 32);
  const vit::TrainReport r =
      vit::train_model({"--init", kTimm, "--heads", "4", "--data", dir + "/data", "--out", dir + "/run", "--epochs",
                        "1", "--batch-size", "8", "--threads", "1", "--plain", "--layer-decay", "0.7"});
  EXPECT_EQ(r.epochs_run, 1);
  const vit::Model tuned = vit::Model::load(dir + "/run/last.safetensors");
  EXPECT_EQ(tuned.num_classes(), 10);  // the file's head, kept: its classes "0".."9" are the data's
  EXPECT_EQ(tuned.image_size(), 32);
  expect_error(
      [&] {
        vit::train_model({"--init", kTimm, "--data", dir + "/data", "--dim", "8"});
      },
      "[train] --dim with --init");
  std::filesystem::remove_all(dir);
}

// The main job's model (a hybrid: convolutions and BatchNorm, then the transformer) trained and run
// through the facade: evaluation uses the running statistics, so an image's logits do not depend on
// the batch it comes in; the tokens are the 7x7 map's positions.
TEST(Facade, TrainsAndRunsTheHybrid) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("vit_facade_hybrid_" + std::to_string(::getpid()))).string();
  write_idx_digits(dir + "/data", 40, 28);
  const vit::TrainReport r = vit::train_model({"--preset", "vit_hybrid_fashion", "--conv-channels", "8", "--dim", "16",
                                               "--data", dir + "/data", "--out", dir + "/run", "--epochs", "1",
                                               "--batch-size", "8", "--threads", "1", "--plain", "--ema", "0"});
  EXPECT_EQ(r.epochs_run, 1);
  const vit::Model model = vit::Model::load(dir + "/run/last.safetensors");
  EXPECT_EQ(model.image_size(), 28);
  EXPECT_EQ(model.in_channels(), 1);
  EXPECT_EQ(model.num_tokens(), 49);
  EXPECT_EQ(model.embed_shape(2, "tokens"), (std::vector<int64_t>{2, 49, 16}));
  std::vector<float> x(3 * 28 * 28);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  const std::vector<float> batch = model.predict(x, {3, 1, 28, 28});
  ASSERT_EQ(batch.size(), 30u);
  for (int64_t b = 0; b < 3; ++b) {
    const std::vector<float> one = model.predict(x.data() + b * 28 * 28, 1);
    for (int64_t k = 0; k < 10; ++k) {
      ASSERT_TRUE(std::isfinite(one[k]));
      EXPECT_NEAR(one[k], batch[b * 10 + k], 1e-5 * std::max(1.0f, std::fabs(one[k]))) << b << " " << k;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Facade, TrainOptionsAreTheCommandsWithOurMessages) {
  expect_error([] { vit::train_model({"--help"}); }, "[train] unknown option --help");
  expect_error([] { vit::train_model({"--lr", "fast"}); }, "[train] --lr: must be a number, got 'fast'");
  expect_error([] { vit::train_keywords({{"hflip", {"no"}}}); }, "[train] hflip: takes true or false, got 'no'");
}

}  // namespace
