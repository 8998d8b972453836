// The load flags, from infer's table (see load_flags.h).
#include "cli/load_flags.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "checkpoint/int8_format.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "core/parse.h"
#include "core/printable.h"
#include "data/image.h"
#include "kernels/gemm/bf16_gemm.h"

namespace vit::cli {

OptionArgs LoadFlags::given() const {
  OptionArgs args;
  for (const auto& [name, option] : options) {
    if (option->count() == 0) continue;
    const infer::LoadOption* o = infer::find_load_option(name);
    // A flag given as its negation (--no-strict) says false.
    if (!o->negation.empty()) {
      args.set(name, {"false"});
    } else {
      args.set(name, o->arity == Arity::Flag ? std::vector<std::string>{} : option->results());
    }
  }
  return args;
}

bool LoadFlags::given(const std::string& name) const {
  return std::any_of(options.begin(), options.end(),
                     [&](const auto& entry) { return entry.first == name && entry.second->count() > 0; });
}

infer::LoadSettings LoadFlags::settings() const { return infer::make_load_settings(given()); }

void add_load_options(CLI::App* cmd, LoadFlags& flags, const std::vector<std::string>& names) {
  CLI::Option* ema = nullptr;
  CLI::Option* raw = nullptr;
  for (const infer::LoadOption& o : infer::load_option_table()) {
    if (!names.empty() && std::find(names.begin(), names.end(), o.name) == names.end()) continue;
    CLI::Option* option = o.arity == Arity::Flag ? cmd->add_flag(flag_of(o.negation.empty() ? o.name : o.negation))
                                                 : cmd->add_option(flag_of(o.name));
    option->description(o.help)->type_name(o.type);
    if (o.arity == Arity::List) option->expected(1, 3);
    if (o.name == "ema") ema = option;
    if (o.name == "raw") raw = option;
    flags.options.emplace_back(o.name, option);
  }
  if (ema != nullptr && raw != nullptr) ema->excludes(raw);
}

void add_model_flags(CLI::App* cmd, LoadFlags& flags, bool require_checkpoint) {
  flags.max_pixels = data::kDefaultMaxPixels;
  cmd->add_option("--checkpoint", flags.checkpoint,
                  "model file: .safetensors (ours, timm, torchvision, Hugging Face), PyTorch .pth/.bin or JAX .npz")
      ->required(require_checkpoint);
  add_load_options(cmd, flags);
  cmd->add_option("--threads", flags.threads, "threads (0: all cores)")->check(kThreads);
  cmd->add_option("--max-pixels", flags.max_pixels, "refuse images with more pixels")->check(kPositive);
}

void note_precision(infer::Precision precision) {
  if (precision != infer::Precision::BF16 || kernels::bf16_gemm_native()) return;
  const bool avx2 = std::string(kernels::bf16_gemm_path()) == "AVX2 float32";
  std::fprintf(stderr,
               "note: no AVX512_BF16 here (the CPU lacks it, or VIT_ISA caps the kernels below AVX-512): --precision "
               "bf16 runs %s (the same bfloat16 rounding of weights and inputs, float32 sums in another order: "
               "outputs agree with AVX512_BF16 to about 1e-3, not bit for bit; %s)\n",
               avx2 ? "float32 AVX2 arithmetic on the bfloat16 values" : "a plain C++ emulation",
               avx2 ? "about fp32's speed, half its weight memory" : "much slower than fp32");
}

void warn_no_checksum(const std::string& path) {
  std::fprintf(stderr, "warning: %s has no checksum (written by an older vit): its integrity cannot be verified\n",
               path.c_str());
}

namespace {

// What --no-strict left out or set aside, on stderr.
// (Keys as core/printable.h shows them, the first kListShown of each kind.)
void print_skipped_keys(const infer::LoadedModel& m, const std::string& path) {
  const auto warn = [&path](const std::vector<std::string>& keys, const char* what, const char* done) {
    for (size_t k = 0; k < keys.size() && k < kListShown; ++k) {
      fmt::print(stderr, "warning: {}: {} key '{}' ({})\n", path, what, printable(keys[k]), done);
    }
    if (keys.size() > kListShown)
      fmt::print(stderr, "warning: {}: ... and {} more {} keys\n", path, keys.size() - kListShown, what);
  };
  warn(m.missing_keys, "missing", "left at its initial value");
  warn(m.unexpected_keys, "unexpected", "ignored");
  if (!m.ignored_keys.empty()) {  // known keys inference has no use for: DINOv2's mask_token, CLIP's position_ids
    fmt::print(stderr, "note: {}: not used for inference: {}\n", path, printable_list(m.ignored_keys));
  }
}

}  // namespace

infer::LoadedModel load_model(const LoadFlags& flags) {
  set_threads(flags.threads);
  const infer::LoadSettings settings = flags.settings();
  infer::LoadedModel m = infer::load_model(flags.checkpoint, settings);
  if (m.layout == "vit" && m.checksum.empty()) warn_no_checksum(flags.checkpoint);
  // Weights other than those the run evaluated, asked for with --raw / --ema: said, since its
  // accuracy is not the one training printed. (The default is said by each command's own output.)
  if (!m.weights_note.empty() && settings.weights != infer::WeightSet::Recorded && m.ema != m.recorded_ema) {
    std::fprintf(stderr, "note: %s: %s\n", flags.checkpoint.c_str(), m.weights_note.c_str());
  }
  if (!settings.strict) print_skipped_keys(m, flags.checkpoint);
  return m;
}

infer::Predictor load_predictor(const LoadFlags& flags, infer::Predictor::WeightPages pages) {
  const infer::Precision precision = flags.settings().precision;
  note_precision(precision);
  infer::LoadedModel m = load_model(flags);
  if (precision == infer::Precision::BF16 && checkpoint::is_quantized(*m.model)) {
    std::fprintf(
        stderr,
        "note: %s is an int8 model: its int8 Linear layers run as int8 whatever --precision says, and "
        "bf16 applies to its float32 layers (the patch embedding), so its outputs differ slightly from fp32's\n",
        flags.checkpoint.c_str());
  }
  return infer::Predictor(std::move(m), pages, precision);
}

}  // namespace vit::cli
