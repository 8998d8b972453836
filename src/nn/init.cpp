// Initialisers (see init.h).
#include "nn/init.h"

#include <cmath>

namespace vit::nn::init {

namespace {
thread_local bool skip_init = false;
}  // namespace

SkipInit::SkipInit() : previous_(skip_init) { skip_init = true; }
SkipInit::~SkipInit() { skip_init = previous_; }
bool SkipInit::active() { return skip_init; }

template <typename Fn>
static void fill_with(Tensor& t, Fn draw) {
  if (skip_init) return;
  VIT_CHECK(t.is_contiguous(), "init", "tensor {} must be contiguous", shape_str(t.shape()));
  dispatch(t.dtype(), [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(draw());
  });
}

void uniform_(Tensor& t, double low, double high, Generator& gen) {
  fill_with(t, [&] { return low + (high - low) * gen.uniform_double(); });
}

void normal_(Tensor& t, double mean, double std, Generator& gen) {
  fill_with(t, [&] { return mean + std * gen.normal(); });
}

void trunc_normal_(Tensor& t, double std, Generator& gen, double mean, double a, double b) {
  if (skip_init) return;
  VIT_CHECK(a < b && std > 0, "trunc_normal_", "needs a < b and std > 0 (a={}, b={}, std={})", a, b, std);
  VIT_CHECK(mean - 6 * std < b && mean + 6 * std > a, "trunc_normal_",
            "[{}, {}] is too far from N({}, {}) to sample by rejection", a, b, mean, std);
  fill_with(t, [&] {
    for (;;) {
      const double v = mean + std * gen.normal();
      if (v >= a && v <= b) return v;
    }
  });
}

void default_weight_(Tensor& t, int64_t fan_in, Generator& gen) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  uniform_(t, -bound, bound, gen);
}

}  // namespace vit::nn::init
