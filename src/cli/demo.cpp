// `vit demo`: a forward and backward pass through a model::VisionTransformer (patch embedding,
// CLS token, position embedding, pre-norm encoder blocks, final norm, head, cross-entropy) on
// random images, reporting shapes, loss, gradient norm and timing. Real work for every layer.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/validators.h"
#include "model/vision_transformer.h"

namespace vit::cli {
namespace {

struct DemoConfig {
  int64_t image_size = 224, patch_size = 16, channels = 3, dim = 192, depth = 12, heads = 3, classes = 1000;
  int64_t batch = 2;
  int threads = 0;
  uint64_t seed = 0;
};

void run_demo(const DemoConfig& c) {
  set_threads(c.threads);
  model::ViTConfig config;  // timm's ViT with CLS pooling, sized by the flags
  config.name = "demo";
  config.image_size = c.image_size;
  config.patch_size = c.patch_size;
  config.in_channels = c.channels;
  config.num_classes = c.classes;
  config.dim = c.dim;
  config.depth = c.depth;
  config.num_heads = c.heads;
  auto gen = std::make_shared<Generator>(c.seed);
  model::VisionTransformer vit(config, gen);  // validates the config
  std::printf("ViT stack: image %ldx%ld, patch %ld, dim %ld, depth %ld, heads %ld, %ld tokens, %ld parameters\n",
              c.image_size, c.image_size, c.patch_size, c.dim, c.depth, c.heads, config.num_tokens(),
              vit.num_parameters());

  Variable images(Tensor::randn({c.batch, c.channels, c.image_size, c.image_size}, *gen));
  std::vector<int64_t> labels;
  for (int64_t b = 0; b < c.batch; ++b) labels.push_back(static_cast<int64_t>(gen->integer(c.classes)));
  const Tensor targets = Tensor::from_data(labels, {c.batch});

  const auto t0 = std::chrono::steady_clock::now();
  Variable logits = vit(images);  // (B, K)
  Variable loss = cross_entropy(logits, targets);
  const auto t1 = std::chrono::steady_clock::now();
  loss.backward();
  const auto t2 = std::chrono::steady_clock::now();

  double grad_sq = 0.0;
  int64_t with_grad = 0;
  for (const Variable& p : vit.parameters()) {
    if (!p.grad().defined()) continue;
    ++with_grad;
    for (double v : p.grad().to_vector()) grad_sq += v * v;
  }
  using ms = std::chrono::duration<double, std::milli>;
  std::printf("batch %ld: logits %s, loss %.4f (ln %ld = %.4f), gradient norm %.4f over %ld tensors\n", c.batch,
              shape_str(logits.shape()).c_str(), loss.item(), c.classes, std::log(static_cast<double>(c.classes)),
              std::sqrt(grad_sq), with_grad);
  std::printf("forward %.1f ms, backward %.1f ms (%d threads)\n", ms(t1 - t0).count(), ms(t2 - t1).count(),
              omp_get_max_threads());
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto config = std::make_shared<DemoConfig>();
  CLI::App* cmd = app.add_subcommand("demo", "forward + backward through a ViT-sized stack on random images");
  cmd->add_option("--image-size", config->image_size, "image height and width")->check(kPositive);
  cmd->add_option("--patch-size", config->patch_size, "patch size")->check(kPositive);
  cmd->add_option("--dim", config->dim, "embedding dim")->check(kPositive);
  cmd->add_option("--depth", config->depth, "number of encoder blocks")->check(kPositive);
  cmd->add_option("--heads", config->heads, "attention heads")->check(kPositive);
  cmd->add_option("--classes", config->classes, "classes")->check(kPositive);
  cmd->add_option("--batch", config->batch, "batch size")->check(kPositive);
  cmd->add_option("--threads", config->threads, "threads (0: all cores)")->check(kThreads);
  cmd->add_option("--seed", config->seed, "random seed")->check(kSeed);
  cmd->callback([config] { run_demo(*config); });
}

}  // namespace vit::cli
