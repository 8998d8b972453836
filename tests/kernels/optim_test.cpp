// The AdamW update kernel (kernels/optim.h) against its formula in double, on awkward lengths
// (the threaded one included) and over several steps, each float ISA path forced in turn.
#include "kernels/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace vit::kernels {
namespace {

using test::close;
using test::random_vector;

TEST(AdamWUpdate, MatchesFormulaOnEveryPath) {
  constexpr double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0.05;
  for (const Isa path : test::kIsaPaths) {
    const ScopedIsaLimit limit(path);
    for (int64_t n : {1, 7, 33, 197, 70001}) {
      std::vector<float> p = random_vector<float>(n, 1), m(n, 0.0f), v(n, 0.0f);
      std::vector<double> ep(p.begin(), p.end()), em(n, 0.0), ev(n, 0.0);
      for (int64_t step = 1; step <= 3; ++step) {
        const std::vector<float> g = random_vector<float>(n, 10 + static_cast<uint64_t>(step));
        adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, beta1, beta2, eps, wd, step);
        for (int64_t i = 0; i < n; ++i) {
          em[i] = beta1 * em[i] + (1 - beta1) * g[i];
          ev[i] = beta2 * ev[i] + (1 - beta2) * g[i] * static_cast<double>(g[i]);
          ep[i] *= 1 - lr * wd;
          ep[i] -= lr / (1 - std::pow(beta1, step)) * em[i] / (std::sqrt(ev[i] / (1 - std::pow(beta2, step))) + eps);
        }
        const std::string name = std::string(isa_name(active_isa())) + " n=" + std::to_string(n);
        EXPECT_TRUE(close(p, ep, test::tolerance_for<float>(), "adamw param " + name));
        EXPECT_TRUE(close(m, em, test::tolerance_for<float>(), "adamw m " + name));
        EXPECT_TRUE(close(v, ev, test::tolerance_for<float>(), "adamw v " + name));
      }
    }
  }
}

}  // namespace
}  // namespace vit::kernels
