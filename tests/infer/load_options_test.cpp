// The load options declared once (infer/load_options.h): the table drives the flags, the keywords
// and the C++ struct alike, with one set of checks whose messages follow the caller's spelling.
#include "infer/load_options.h"

#include <gtest/gtest.h>

#include "core/check.h"

namespace vit::infer {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

OptionArgs args(Spelling spelling, std::vector<OptionArgs::Given> given) {
  OptionArgs a;
  a.spelling = spelling;
  a.given = std::move(given);
  return a;
}

TEST(LoadOptions, EveryOptionSetsTheStructFieldOfItsName) {
  const vit::LoadOptions o = read_load_options(args(Spelling::Keywords, {{"layout", {"jax"}},
                                                                         {"heads", {"6"}},
                                                                         {"eps", {"1e-5"}},
                                                                         {"act", {"quick_gelu"}},
                                                                         {"image_size", {"384"}},
                                                                         {"strict", {"false"}},
                                                                         {"ema", {}},
                                                                         {"allow_nonfinite", {"true"}},
                                                                         {"resize", {"256"}},
                                                                         {"crop", {"0"}},
                                                                         {"interpolation", {"bicubic"}},
                                                                         {"mean", {"0.5"}},
                                                                         {"std", {"0.2", "0.3", "0.4"}},
                                                                         {"precision", {"bf16"}}}));
  EXPECT_EQ(o.layout, "jax");
  EXPECT_EQ(o.heads, 6);
  EXPECT_DOUBLE_EQ(o.eps, 1e-5);
  EXPECT_EQ(o.act, "quick_gelu");
  EXPECT_EQ(o.image_size, 384);
  EXPECT_FALSE(o.strict);
  EXPECT_TRUE(o.ema);
  EXPECT_FALSE(o.raw);
  EXPECT_TRUE(o.allow_nonfinite);
  EXPECT_EQ(o.resize, 256);
  EXPECT_EQ(o.crop, 0);
  EXPECT_EQ(o.interpolation, "bicubic");
  EXPECT_EQ(o.mean, std::vector<double>{0.5});
  EXPECT_EQ(o.std, (std::vector<double>{0.2, 0.3, 0.4}));
  EXPECT_EQ(o.precision, "bf16");
  // Each of the table's options was set above: a new option needs a line here (and a field).
  EXPECT_EQ(load_option_table().size(), 15u);
  const LoadSettings s = resolve_load_options(o, Spelling::Keywords);
  EXPECT_EQ(s.layout, model::Layout::Jax);
  EXPECT_EQ(s.weights, WeightSet::Ema);
  EXPECT_EQ(s.interpolation, Filter::Bicubic);
  EXPECT_EQ(s.precision, Precision::BF16);
  EXPECT_FALSE(s.strict);
}

TEST(LoadOptions, OneMessageInTheCallersSpelling) {
  EXPECT_EQ(error_of([] {
              make_load_settings(args(Spelling::Flags, {{"heads", {"0"}}}));
            }),
            "[load] --heads: must be a whole number >= 1, got 0");
  EXPECT_EQ(error_of([] {
              make_load_settings(args(Spelling::Keywords, {{"heads", {"0"}}}));
            }),
            "[load] heads: must be a whole number >= 1, got 0");
  EXPECT_EQ(error_of([] {
              make_load_settings(args(Spelling::Flags, {{"image_size", {"-28"}}}));
            }),
            "[load] --image-size: must be a whole number >= 1, got -28");
  EXPECT_EQ(error_of([] {
              make_load_settings(args(Spelling::Flags, {{"act", {"swish"}}}));
            }),
            "[load] --act: must be one of gelu, gelu_tanh, quick_gelu, relu, got 'swish'");
  EXPECT_EQ(error_of([] {
              make_load_settings(args(Spelling::Flags, {{"ema", {}}, {"raw", {}}}));
            }),
            "[load] --ema and --raw exclude each other (default: the weights the run evaluated)");
  EXPECT_NE(error_of([] {
              make_load_settings(args(Spelling::Keywords, {{"hedas", {"4"}}}));
            }).find("[load] unknown option hedas (known: layout, heads, eps"),
            std::string::npos);
  // The C++ struct's own defaults (0: the file's) and its checks, in the keywords' spelling.
  vit::LoadOptions o;
  o.heads = -1;
  EXPECT_EQ(error_of([&] { resolve_load_options(o, Spelling::Keywords); }),
            "[load] heads must be >= 1 (0: from the file), got -1");
  o = {};
  o.layout = "tim";
  EXPECT_EQ(error_of([&] { resolve_load_options(o, Spelling::Keywords); }),
            "[load] layout: must be one of timm, torchvision, huggingface, jax, got 'tim'");
  o = {};
  o.ema = o.raw = true;
  EXPECT_EQ(error_of([&] { resolve_load_options(o, Spelling::Keywords); }),
            "[load] ema and raw exclude each other (default: the weights the run evaluated)");
}

}  // namespace
}  // namespace vit::infer
