// `vit demo`: a forward and backward pass through a ViT-sized stack (patch embedding, CLS
// token, position embedding, pre-norm encoder blocks, final norm, head, cross-entropy) on
// random images, reporting shapes, loss, gradient norm and timing. Real work for every layer.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "nn/init.h"
#include "nn/transformer.h"

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
  auto gen = std::make_shared<Generator>(c.seed);
  nn::PatchEmbed patch_embed(c.image_size, c.patch_size, c.channels, c.dim, *gen);
  const int64_t tokens = patch_embed.num_patches() + 1;
  Tensor cls_init = Tensor::empty({1, 1, c.dim}), pos_init = Tensor::empty({1, tokens, c.dim});
  nn::init::trunc_normal_(cls_init, 0.02, *gen);
  nn::init::trunc_normal_(pos_init, 0.02, *gen);
  Variable cls_token(cls_init, true), pos_embed(pos_init, true);
  nn::Sequential blocks;
  nn::EncoderBlockConfig bc;
  bc.dim = c.dim;
  bc.num_heads = c.heads;
  for (int64_t i = 0; i < c.depth; ++i) blocks.push_back(std::make_shared<nn::EncoderBlock>(bc, gen));
  nn::LayerNorm norm({c.dim}, 1e-6);
  nn::Linear head(c.dim, c.classes, true, *gen);
  const int64_t params = patch_embed.num_parameters() + cls_init.numel() + pos_init.numel() + blocks.num_parameters() +
                         norm.num_parameters() + head.num_parameters();
  std::printf("ViT stack: image %ldx%ld, patch %ld, dim %ld, depth %ld, heads %ld, %ld tokens, %ld parameters\n",
              c.image_size, c.image_size, c.patch_size, c.dim, c.depth, c.heads, tokens, params);

  Variable images(Tensor::randn({c.batch, c.channels, c.image_size, c.image_size}, *gen));
  std::vector<int64_t> labels;
  for (int64_t b = 0; b < c.batch; ++b) labels.push_back(static_cast<int64_t>(gen->integer(c.classes)));
  const Tensor targets = Tensor::from_data(labels, {c.batch});

  const auto t0 = std::chrono::steady_clock::now();
  Variable x = patch_embed(images);                                      // (B, N-1, D)
  x = cat({cls_token.expand({c.batch, 1, c.dim}), x}, 1) + pos_embed;    // (B, N, D)
  x = blocks(x);                                                         // (B, N, D)
  Variable logits = head(norm(x).select(1, 0));                          // (B, K)
  Variable loss = cross_entropy(logits, targets);
  const auto t1 = std::chrono::steady_clock::now();
  loss.backward();
  const auto t2 = std::chrono::steady_clock::now();

  double grad_sq = 0.0;
  int64_t with_grad = 0;
  auto add_grads = [&](const std::vector<Variable>& ps) {
    for (const Variable& p : ps) {
      if (!p.grad().defined()) continue;
      ++with_grad;
      for (double v : p.grad().to_vector()) grad_sq += v * v;
    }
  };
  add_grads(patch_embed.parameters());
  add_grads({cls_token, pos_embed});
  add_grads(blocks.parameters());
  add_grads(norm.parameters());
  add_grads(head.parameters());
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
  cmd->add_option("--image-size", config->image_size, "image height and width")->check(CLI::PositiveNumber);
  cmd->add_option("--patch-size", config->patch_size, "patch size")->check(CLI::PositiveNumber);
  cmd->add_option("--dim", config->dim, "embedding dim")->check(CLI::PositiveNumber);
  cmd->add_option("--depth", config->depth, "number of encoder blocks")->check(CLI::PositiveNumber);
  cmd->add_option("--heads", config->heads, "attention heads")->check(CLI::PositiveNumber);
  cmd->add_option("--classes", config->classes, "classes")->check(CLI::PositiveNumber);
  cmd->add_option("--batch", config->batch, "batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", config->threads, "threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", config->seed, "random seed");
  cmd->callback([config] { run_demo(*config); });
}

}  // namespace vit::cli
