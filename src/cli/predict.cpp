// `vit predict`: top-k classes with probabilities for image files.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "cli/commands.h"
#include "data/image.h"
#include "train/checkpoint.h"

namespace vit::cli {

void add_predict_command(CLI::App& app) {
  struct Options {
    std::string checkpoint;
    std::vector<std::string> images;
    int64_t top_k = 5, max_pixels = data::kDefaultMaxPixels;
    bool ema = false, invert = false;
    int threads = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("predict", "classify PNG/JPEG images with a checkpoint");
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint file")->required();
  cmd->add_option("images", o->images, "image files (PNG, JPEG, BMP, ...)")->required();
  cmd->add_option("--top-k", o->top_k, "classes to show")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-pixels", o->max_pixels, "refuse images with more pixels")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_flag("--invert", o->invert, "invert grey levels (dark digits on light paper -> MNIST style)");
  cmd->add_flag("--ema", o->ema, "use the checkpoint's EMA weights");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->callback([o] {
    set_threads(o->threads);
    const train::LoadedCheckpoint ckpt = train::load_checkpoint(o->checkpoint);
    auto model = train::model_from_checkpoint(ckpt, o->ema);
    model->eval();
    const model::ViTConfig& mc = ckpt.info.model;
    const auto& norm = ckpt.info.normalization;
    const int64_t C = mc.in_channels, S = mc.image_size;
    // Decode everything first: a bad file stops the command before any output.
    Tensor batch = Tensor::empty({static_cast<int64_t>(o->images.size()), C, S, S});
    float* out = batch.data<float>();
    for (size_t i = 0; i < o->images.size(); ++i) {
      data::Image image = data::resize(data::convert_channels(data::read_image(o->images[i], o->max_pixels), C), S, S);
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t p = 0; p < S * S; ++p) {
          double v = image.pixels[c * S * S + p] / 255.0;
          if (o->invert) v = 1.0 - v;
          out[(static_cast<int64_t>(i) * C + c) * S * S + p] = static_cast<float>((v - norm.mean[c]) / norm.std[c]);
        }
      }
    }
    NoGradGuard no_grad;
    const Tensor probs = softmax((*model)(Variable(batch)), 1).data().contiguous();
    const int64_t K = mc.num_classes, k = std::min(o->top_k, K);
    for (size_t i = 0; i < o->images.size(); ++i) {
      const float* row = probs.data<float>() + static_cast<int64_t>(i) * K;
      std::vector<int64_t> order(K);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int64_t a, int64_t b) { return row[a] > row[b]; });
      std::printf("%s\n", o->images[i].c_str());
      for (int64_t j = 0; j < k; ++j) {
        const auto cls = static_cast<size_t>(order[j]);
        const std::string name = cls < ckpt.info.class_names.size() ? ckpt.info.class_names[cls] : std::to_string(cls);
        std::printf("  %-14s %6.2f%%\n", name.c_str(), 100.0 * row[order[j]]);
      }
    }
  });
}

}  // namespace vit::cli
