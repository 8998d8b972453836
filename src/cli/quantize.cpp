// `vit quantize`: an int8 copy of any checkpoint vit loads (infer/quantize.h).
#include <cstdio>

#include "cli/commands.h"
#include "cli/validators.h"
#include "infer/quantize_file.h"

namespace vit::cli {

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, out, layout;
    int64_t heads = 0;
    double eps = 0;
    bool overwrite = false;
    int threads = 0;
    int bits = 8;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "write an int8 copy of a checkpoint: Linear weights int8 per output channel, the rest float32");
  cmd->add_option("--checkpoint", o->checkpoint,
                  "the float checkpoint (.safetensors: ours, timm, torchvision or Hugging Face; F32/F16/BF16)")
      ->required();
  cmd->add_option("--out", o->out, "the int8 checkpoint to write (.safetensors)")->required();
  cmd->add_option("--layout", o->layout, "force the key layout: timm, torchvision, huggingface (default: detected)");
  cmd->add_option("--heads", o->heads, "attention heads (default: from the file, else standard for the width)")
      ->check(kPositive);
  cmd->add_option("--eps", o->eps, "LayerNorm eps (default: from the file or the layout)")->check(kPositive);
  cmd->add_option("--bits", o->bits,
                  "weight bits: 8 ([-127, 127], scheme vit-int8-2) or 7 ([-63, 63], vit-int8-1: the older files' "
                  "scheme, faster on CPUs without AVX-512 VNNI)")
      ->check(CLI::IsMember({7, 8}))
      ->capture_default_str();
  cmd->add_flag("--overwrite", o->overwrite, "replace --out if it exists");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(kThreads);
  cmd->callback([o] {
    set_threads(o->threads);
    infer::LoadOptions options;
    if (!o->layout.empty()) options.layout = model::parse_layout(o->layout);
    options.num_heads = o->heads;
    if (o->eps > 0) options.eps = o->eps;
    const infer::QuantizeFileResult r = infer::quantize_file(o->checkpoint, o->out, options, o->overwrite, o->bits);
    const infer::QuantizeSummary& summary = r.summary;
    const auto in_bytes = static_cast<double>(r.in_bytes), out_bytes = static_cast<double>(r.out_bytes);
    std::printf("quantized %s (%s layout) -> %s in %.2f s\n", o->checkpoint.c_str(), r.layout.c_str(), o->out.c_str(),
                r.seconds);
    std::printf(
        "  %ld Linear weights to int8 (%.2f M values, per output channel, %d-bit); %.2f M values stay float32\n",
        summary.tensors, static_cast<double>(summary.int8_values) / 1e6, summary.bits,
        static_cast<double>(summary.float_values) / 1e6);
    std::printf("  file: %.1f MB -> %.1f MB (%.3fx)\n", in_bytes / 1e6, out_bytes / 1e6, out_bytes / in_bytes);
    std::printf("  weight error: largest |w - dequantised w| %.3g; worst tensor RMS error %.2f%% of its RMS\n",
                summary.max_abs_error, 100.0 * summary.max_rel_rms_error);
  });
}

}  // namespace vit::cli
