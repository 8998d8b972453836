// `vit quantize`: an int8 copy of any checkpoint vit loads (infer/quantize.h).
#include "infer/quantize.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/validators.h"
#include "infer/checkpoint.h"
#include "infer/pretrained.h"
#include "io/safetensors.h"

namespace vit::cli {

namespace fs = std::filesystem;

void add_quantize_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, out, layout;
    int64_t heads = 0;
    double eps = 0;
    bool overwrite = false;
    int threads = 0;
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
  cmd->add_flag("--overwrite", o->overwrite, "replace --out if it exists");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(kThreads);
  cmd->callback([o] {
    set_threads(o->threads);
    const auto start = std::chrono::steady_clock::now();
    VIT_CHECK(!o->out.empty(), "quantize", "--out is empty: give the int8 file to write");
    VIT_CHECK(!fs::is_directory(o->out), "quantize", "--out {} is a directory: give the int8 file to write", o->out);
    std::error_code ec;
    VIT_CHECK(!fs::exists(o->out) || !fs::equivalent(o->checkpoint, o->out, ec), "quantize",
              "--out {} is the input checkpoint itself: write the int8 copy to another file", o->out);
    VIT_CHECK(o->overwrite || !fs::exists(o->out), "quantize", "--out {} exists (--overwrite replaces it)", o->out);
    infer::LoadOptions options;
    if (!o->layout.empty()) options.layout = model::parse_layout(o->layout);
    options.num_heads = o->heads;
    if (o->eps > 0) options.eps = o->eps;
    infer::LoadedModel m = infer::load_model(o->checkpoint, options);
    VIT_CHECK(!infer::is_quantized(*m.model), "quantize",
              "{}: already an int8 model (written by vit quantize); quantize the float checkpoint it came from",
              o->checkpoint);
    infer::QuantizeSummary summary;
    try {
      summary = infer::quantize_linears(*m.model);
    } catch (const std::exception& e) {
      infer::rethrow_for_file(o->checkpoint, e);
    }

    infer::save_checkpoint(o->out, *m.model, infer::checkpoint_info(m));

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto in_bytes = static_cast<double>(fs::file_size(o->checkpoint));
    const auto out_bytes = static_cast<double>(fs::file_size(o->out));
    std::printf("quantized %s (%s layout) -> %s in %.2f s\n", o->checkpoint.c_str(), m.layout.c_str(), o->out.c_str(),
                seconds);
    std::printf("  %ld Linear weights to int8 (%.2f M values, per output channel, 7-bit); %.2f M values stay float32\n",
                summary.tensors, static_cast<double>(summary.int8_values) / 1e6,
                static_cast<double>(summary.float_values) / 1e6);
    std::printf("  file: %.1f MB -> %.1f MB (%.3fx)\n", in_bytes / 1e6, out_bytes / 1e6, out_bytes / in_bytes);
    std::printf("  weight error: largest |w - dequantised w| %.3g; worst tensor RMS error %.2f%% of its RMS\n",
                summary.max_abs_error, 100.0 * summary.max_rel_rms_error);
  });
}

}  // namespace vit::cli
