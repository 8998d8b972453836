// The load options, declared once (see load_options.h).
#include "infer/load_options.h"

#include <fmt/ranges.h>

#include <cmath>

#include "core/check.h"
#include "core/parse.h"
#include "nn/activation_kind.h"

namespace vit::infer {
namespace {

const char* kOp = "load";
using Values = std::vector<std::string>;
using Setter = std::function<void(vit::LoadOptions&, const Values&, const std::string&)>;

const std::vector<std::string> kLayouts = {"timm", "torchvision", "huggingface", "jax"};
const std::vector<std::string> kActivations = nn::activation_names();
const std::vector<std::string> kInterpolations = {"bilinear", "bicubic"};
const std::vector<std::string> kPrecisions = precision_names();

const std::string& one(const Values& values, const std::string& what) {
  VIT_CHECK(values.size() == 1, kOp, "{}: takes one value, got {}", what, values.size());
  return values[0];
}

// Setters by field type: the option's text parsed into the field (whole numbers >= `min`).
Setter whole(int64_t vit::LoadOptions::*field, int64_t min) {
  return [field, min](vit::LoadOptions& o, const Values& v, const std::string& what) {
    o.*field = parse_int(one(v, what), kOp, what, min);
  };
}
Setter flag(bool vit::LoadOptions::*field) {
  return [field](vit::LoadOptions& o, const Values& v, const std::string& what) {
    o.*field = v.empty() || parse_bool(one(v, what), kOp, what);
  };
}
Setter choice(std::string vit::LoadOptions::*field, const std::vector<std::string>& choices) {
  return [field, &choices](vit::LoadOptions& o, const Values& v, const std::string& what) {
    o.*field = parse_choice(one(v, what), kOp, what, choices);
  };
}
Setter numbers(std::vector<double> vit::LoadOptions::*field) {
  return [field](vit::LoadOptions& o, const Values& v, const std::string& what) {
    VIT_CHECK(!v.empty() && v.size() <= 3, kOp, "{}: takes 1 value (every channel) or 1 per channel (3), got {}", what,
              v.size());
    (o.*field).clear();
    for (const std::string& text : v) (o.*field).push_back(parse_number(text, kOp, what));
  };
}

std::vector<LoadOption> make_table() {
  return {
      {"layout", Arity::One, "TEXT", "force the key layout: timm, torchvision, huggingface, jax (default: detected)",
       "", choice(&vit::LoadOptions::layout, kLayouts)},
      {"heads", Arity::One, "INT", "attention heads (default: from the file, else standard for the width)", "",
       whole(&vit::LoadOptions::heads, 1)},
      {"eps", Arity::One, "FLOAT",
       "LayerNorm eps (default: timm/torchvision 1e-6, Hugging Face ViT/DeiT 1e-12, DINOv2 1e-6, CLIP 1e-5)", "",
       [](vit::LoadOptions& o, const Values& v, const std::string& what) {
         o.eps = parse_number(one(v, what), kOp, what);
         VIT_CHECK(o.eps > 0, kOp, "{}: must be a positive number, got {}", what, one(v, what));
       }},
      {"act", Arity::One, "TEXT",
       "MLP activation: gelu, gelu_tanh, quick_gelu, relu (default: the file's; a timm-layout OpenAI CLIP runs "
       "quick_gelu, LAION's CLIPs need gelu; JAX files run exact gelu as timm does, gelu_tanh as JAX does)",
       "", choice(&vit::LoadOptions::act, kActivations)},
      {"image_size", Arity::One, "INT", "run at this resolution (position embedding interpolated)", "",
       whole(&vit::LoadOptions::image_size, 1)},
      {"strict", Arity::Flag, "", "refuse missing / unexpected keys (--no-strict: list them and continue)", "no_strict",
       flag(&vit::LoadOptions::strict)},
      {"ema", Arity::Flag, "",
       "the EMA weights: a vit checkpoint's, or a PyTorch file's EMA state dict (default: the weights its run "
       "evaluated, EMA if it had them)",
       "", flag(&vit::LoadOptions::ema)},
      {"raw", Arity::Flag, "", "a vit checkpoint's raw weights, not their EMA", "", flag(&vit::LoadOptions::raw)},
      {"allow_nonfinite", Arity::Flag, "", "load weights that hold NaN or Inf (refused by default)", "",
       flag(&vit::LoadOptions::allow_nonfinite)},
      {"resize", Arity::One, "INT", "preprocessing: resize the shorter side to this", "",
       whole(&vit::LoadOptions::resize, 1)},
      {"crop", Arity::One, "INT", "preprocessing: center crop size (0: none)", "", whole(&vit::LoadOptions::crop, 0)},
      {"interpolation", Arity::One, "TEXT", "preprocessing: bilinear or bicubic", "",
       choice(&vit::LoadOptions::interpolation, kInterpolations)},
      {"mean", Arity::List, "FLOAT", "preprocessing: per-channel mean (1 value, or 1 per channel)", "",
       numbers(&vit::LoadOptions::mean)},
      {"std", Arity::List, "FLOAT", "preprocessing: per-channel std (1 value, or 1 per channel)", "",
       numbers(&vit::LoadOptions::std)},
      {"precision", Arity::One, "TEXT",
       "fp32, or bf16: the Linear layers in bfloat16 with float32 accumulation (AVX512_BF16 where the CPU has it; "
       "LayerNorm, softmax and the residual stream stay float32)",
       "", choice(&vit::LoadOptions::precision, kPrecisions)},
  };
}

// A text option of the struct: empty, or one of `choices`.
void check_choice(const std::string& value, const std::vector<std::string>& choices, const std::string& what) {
  VIT_CHECK(value.empty() || std::find(choices.begin(), choices.end(), value) != choices.end(), kOp,
            "{}: must be one of {}, got '{}'", what, fmt::join(choices, ", "), value);
}

// The struct's own bounds (what its defaults mean), said in the caller's spelling.
void check_struct(const vit::LoadOptions& o, const OptionArgs& names) {
  VIT_CHECK(o.heads >= 0, kOp, "{} must be >= 1 (0: from the file), got {}", names.what("heads"), o.heads);
  VIT_CHECK(o.eps == 0.0 || (o.eps > 0 && std::isfinite(o.eps)), kOp,
            "{} must be a positive number (0: the file's), got {}", names.what("eps"), number_str(o.eps));
  VIT_CHECK(o.image_size >= 0, kOp, "{} must be >= 1 (0: the file's), got {}", names.what("image_size"), o.image_size);
  VIT_CHECK(o.resize >= 0, kOp, "{} must be >= 1 (0: the file's), got {}", names.what("resize"), o.resize);
  VIT_CHECK(o.crop >= -1, kOp, "{} must be >= 0 (0: no crop; -1: the file's), got {}", names.what("crop"), o.crop);
  VIT_CHECK(!(o.ema && o.raw), kOp, "{} and {} exclude each other (default: the weights the run evaluated)",
            names.what("ema"), names.what("raw"));
  check_choice(o.layout, kLayouts, names.what("layout"));
  check_choice(o.act, kActivations, names.what("act"));
  check_choice(o.interpolation, kInterpolations, names.what("interpolation"));
  check_choice(o.precision, kPrecisions, names.what("precision"));
  for (const auto* list : {&o.mean, &o.std}) {
    const std::string what = names.what(list == &o.mean ? "mean" : "std");
    VIT_CHECK(list->size() <= 3, kOp, "{} takes 1 value (every channel) or 1 per channel (3), got {}", what,
              list->size());
  }
}

}  // namespace

const std::vector<LoadOption>& load_option_table() {
  static const std::vector<LoadOption> table = make_table();
  return table;
}

const LoadOption* find_load_option(const std::string& name) {
  for (const LoadOption& o : load_option_table()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

vit::LoadOptions read_load_options(const OptionArgs& args) {
  vit::LoadOptions o;
  for (const OptionArgs::Given& g : args.given) {
    const LoadOption* option = find_load_option(g.name);
    if (option == nullptr) {
      std::vector<std::string> known;
      for (const LoadOption& l : load_option_table()) known.push_back(args.what(l.name));
      fail(kOp, "unknown option {} (known: {})", args.what(g.name), fmt::join(known, ", "));
    }
    option->set(o, g.values, args.what(g.name));
  }
  return o;
}

LoadSettings resolve_load_options(const vit::LoadOptions& o, Spelling spelling) {
  OptionArgs names;
  names.spelling = spelling;
  check_struct(o, names);
  LoadSettings s;
  if (!o.layout.empty()) s.layout = model::parse_layout(o.layout);
  s.num_heads = o.heads;
  if (o.eps > 0) s.eps = o.eps;
  if (!o.act.empty()) s.act = o.act;
  s.image_size = o.image_size;
  s.strict = o.strict;
  s.weights = o.ema ? WeightSet::Ema : o.raw ? WeightSet::Raw : WeightSet::Recorded;
  s.allow_nonfinite = o.allow_nonfinite;
  s.resize = o.resize;
  s.crop = o.crop;
  if (!o.interpolation.empty()) s.interpolation = parse_filter(o.interpolation);
  s.mean = o.mean;
  s.std = o.std;
  s.precision = parse_precision(o.precision, kOp);
  return s;
}

LoadSettings make_load_settings(const OptionArgs& args) {
  return resolve_load_options(read_load_options(args), args.spelling);
}

}  // namespace vit::infer
