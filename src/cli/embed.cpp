// `vit embed`: image embeddings (pooled features, CLIP's projected embedding, or every token) for
// image files or a .npy batch, written as one float32 .npy with a row per image.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "cli/validators.h"
#include "core/output_file.h"
#include "io/npy.h"

namespace vit::cli {

void add_embed_command(CLI::App& app) {
  struct Options : LoadFlags {
    std::vector<std::string> images;
    std::string tensor, out, pool;
    int64_t batch = 16;
    bool overwrite = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "embed", "image embeddings: the pooled features before the head (CLIP: the projected embedding), or every token");
  add_model_flags(cmd, *o);
  cmd->add_option("images", o->images, "image files (PNG, JPEG, BMP, ...)");
  cmd->add_option("--tensor", o->tensor, "a float32 (B, C, H, W) .npy input instead of images");
  cmd->add_option("--out", o->out, "write the embeddings here (.npy, float32): (B, E), or (B, N, D) for tokens")
      ->required();
  cmd->add_flag("--overwrite", o->overwrite,
                "replace --out if it exists (never an input: the checkpoint, --tensor, an image)");
  cmd->add_option("--pool", o->pool,
                  "cls (the class token; DeiT: with the distillation token), avg (the mean of the patch tokens), "
                  "tokens (the whole final sequence); default: the model's own pooling")
      ->check(CLI::IsMember({"cls", "avg", "tokens"}));
  cmd->add_option("--batch-size", o->batch, "images per forward pass")->capture_default_str()->check(kPositive);
  cmd->callback([o] {
    VIT_CHECK(o->images.empty() != o->tensor.empty(), "embed", "give image files or --tensor FILE.npy (not both)");
    std::vector<InputFile> inputs = {{"the checkpoint", o->checkpoint}, {"the --tensor input", o->tensor}};
    for (const std::string& image : o->images) inputs.push_back({"the input image", image});
    const OutputFile out_file{"--out", o->out, "the .npy file", "--overwrite"};
    check_output("embed", out_file, inputs, o->overwrite);  // before the model is loaded
    infer::Predictor model = load_predictor(*o, infer::Predictor::WeightPages::Release);
    const model::ViTConfig& c = model.config();
    const infer::Pool pool = o->pool.empty() ? model.default_pool() : infer::parse_pool(o->pool);
    model.check_pool(pool, "embed");
    model::check_memory(c, std::min<int64_t>(o->batch, std::max<size_t>(o->images.size(), 1)), false);
    const Tensor input =
        o->tensor.empty() ? model.read_images(o->images, o->max_pixels) : model.read_npy(o->tensor, "embed");
    std::vector<Tensor> parts;
    for (int64_t b = 0; b < input.size(0); b += o->batch) {
      parts.push_back(model.embed(input.slice(0, b, std::min(input.size(0), b + o->batch)), pool));
    }
    const Tensor out = parts.empty() ? Tensor::empty(model.embed_shape(0, pool)) : cat(parts, 0);
    check_output("embed", out_file, inputs, o->overwrite);  // again, just before writing
    io::save_npy(o->out, out, o->overwrite ? Existing::Replace : Existing::Refuse);
    std::printf("wrote %s: %s float32 (%s; %s, %s layout)\n", o->out.c_str(), shape_str(out.shape()).c_str(),
                model.describe(pool).c_str(), model::family_name(model.loaded().family), model.loaded().layout.c_str());
    if (!model.loaded().weights_note.empty()) std::printf("weights: %s\n", model.loaded().weights_note.c_str());
  });
}

}  // namespace vit::cli
