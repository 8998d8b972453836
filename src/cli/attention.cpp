// `vit attention`: the CLS token's attention and attention rollout drawn over an image.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "core/output_file.h"
#include "core/printable.h"
#include "infer/attention_map.h"

namespace vit::cli {

void add_attention_command(CLI::App& app) {
  struct Options : LoadFlags {
    std::string image, out = "attention.png";
    int64_t size = 224;
    bool overwrite = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("attention", "draw where a ViT looks (last-block CLS attention and rollout) as an image");
  add_model_flags(cmd, *o);
  cmd->add_option("image", o->image, "image file")->required();
  cmd->add_option("--out", o->out,
                  "output image (.png, .jpg or .bmp); an existing file, attention.png too, is kept unless --overwrite")
      ->capture_default_str();
  cmd->add_flag("--overwrite", o->overwrite, "replace --out if it exists (never an input: the checkpoint, the image)");
  cmd->add_option("--size", o->size, "panel size in pixels")->capture_default_str()->check(CLI::Range(16, 2048));
  cmd->callback([o] {
    const std::vector<InputFile> inputs = {{"the checkpoint", o->checkpoint}, {"the input image", o->image}};
    const OutputFile out_file{"--out", o->out, "the image file", "--overwrite"};
    check_output("attention", out_file, inputs, o->overwrite);  // before the model is loaded
    VIT_CHECK(o->settings().precision == infer::Precision::F32, "attention",
              "--precision bf16: attention maps come from the float32 graph (bf16 is for predict, embed and serve)");
    infer::LoadedModel m = load_model(*o);
    const data::Image image = data::read_image(o->image, o->max_pixels);
    const infer::AttentionMaps maps = infer::attention_maps(*m.model, image, m.preprocess);
    const data::Image drawing = infer::render_attention(image, maps, o->size);
    check_output("attention", out_file, inputs, o->overwrite);  // again, just before writing
    data::write_image(o->out, drawing, o->overwrite ? Existing::Replace : Existing::Refuse);
    const model::ViTConfig& c = m.model->config();
    const std::string seen =
        maps.predicted_class >= 0
            ? fmt::format("predicted {} ({:.2f}%)", printable(m.class_names[static_cast<size_t>(maps.predicted_class)]),
                          100.0 * maps.probability)
            : fmt::format("{} has no classifier head ({}): the maps only", c.name,
                          c.projection ? "its head is CLIP's image projection" : "a feature extractor");
    std::printf("%s: %s; wrote %s [image | last-block attention | rollout], %ldx%ld grid\n", o->image.c_str(),
                seen.c_str(), o->out.c_str(), maps.grid, maps.grid);
  });
}

}  // namespace vit::cli
