// `vit quantize`: an int8 copy of any checkpoint vit loads (infer/quantize.h), or (--dtype bf16) a
// copy with its Linear and convolution weights stored as bfloat16 (checkpoint/bf16_format.h).
#include <cstdio>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "cli/validators.h"
#include "infer/quantize_file.h"

namespace vit::cli {

void add_quantize_command(CLI::App& app) {
  struct Options : LoadFlags {
    std::string out;
    bool overwrite = false;
    int bits = 8;
    std::string dtype = "int8";
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "write an int8 copy of a checkpoint (Linear weights int8 per output channel, the rest float32), or with --dtype "
      "bf16 a half-size copy (Linear and convolution weights bfloat16)");
  cmd->add_option("--checkpoint", o->checkpoint,
                  "the float checkpoint: .safetensors (ours, timm, torchvision, Hugging Face; F32/F16/BF16), PyTorch "
                  ".pth/.bin or JAX .npz")
      ->required();
  cmd->add_option("--out", o->out, "the checkpoint to write (.safetensors)")->required();
  add_load_options(cmd, *o, {"layout", "heads", "eps"});
  cmd->add_option("--dtype", o->dtype,
                  "int8 (per-channel int8 Linear weights), or bf16 (Linear and convolution weights stored as bfloat16, "
                  "rounded to nearest even, scheme vit-bf16-1: loads as float32, and --precision bf16 runs it as it "
                  "runs the float file)")
      ->check(CLI::IsMember({"int8", "bf16"}))
      ->capture_default_str();
  CLI::Option* bits =
      cmd->add_option("--bits", o->bits,
                      "int8 weight bits: 8 ([-127, 127], scheme vit-int8-2) or 7 ([-63, 63], vit-int8-1: the older "
                      "files' scheme, faster on CPUs without AVX-512 VNNI)")
          ->check(CLI::IsMember({7, 8}))
          ->capture_default_str();
  cmd->add_flag("--overwrite", o->overwrite, "replace --out if it exists");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(kThreads);
  cmd->callback([o, bits] {
    VIT_CHECK(o->dtype == "int8" || bits->count() == 0, "quantize",
              "--bits {} is for --dtype int8 (the int8 weights' bits); --dtype {} has none", o->bits, o->dtype);
    set_threads(o->threads);
    const bool bf16 = o->dtype == "bf16";
    const infer::LoadSettings options = o->settings();
    const infer::QuantizeFileResult r =
        infer::quantize_file(o->checkpoint, o->out, options, o->overwrite, o->bits, {},
                             bf16 ? infer::QuantizeDtype::BF16 : infer::QuantizeDtype::Int8);
    const auto in_bytes = static_cast<double>(r.in_bytes), out_bytes = static_cast<double>(r.out_bytes);
    std::printf("quantized %s (%s layout) -> %s in %.2f s\n", o->checkpoint.c_str(), r.layout.c_str(), o->out.c_str(),
                r.seconds);
    if (bf16) {
      const infer::Bf16Summary& summary = r.bf16;
      std::printf(
          "  %ld Linear and convolution weights to bf16 (%.2f M values, round to nearest even); %.2f M values stay "
          "float32\n",
          summary.tensors, static_cast<double>(summary.bf16_values) / 1e6,
          static_cast<double>(summary.float_values) / 1e6);
    } else {
      const infer::QuantizeSummary& summary = r.summary;
      std::printf(
          "  %ld Linear weights to int8 (%.2f M values, per output channel, %d-bit); %.2f M values stay float32\n",
          summary.tensors, static_cast<double>(summary.int8_values) / 1e6, summary.bits,
          static_cast<double>(summary.float_values) / 1e6);
    }
    std::printf("  file: %.1f MB -> %.1f MB (%.3fx)\n", in_bytes / 1e6, out_bytes / 1e6, out_bytes / in_bytes);
    const double max_abs = bf16 ? r.bf16.max_abs_error : r.summary.max_abs_error;
    const double rel_rms = bf16 ? r.bf16.max_rel_rms_error : r.summary.max_rel_rms_error;
    std::printf("  weight error: largest |w - %s w| %.3g; worst tensor RMS error %.2f%% of its RMS\n",
                bf16 ? "bf16" : "dequantised", max_abs, 100.0 * rel_rms);
  });
}

}  // namespace vit::cli
