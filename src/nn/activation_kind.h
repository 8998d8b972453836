// The kinds of MLP activation, each named once: configs, checkpoint metadata, flags and Python
// keywords carry the names; the engine (nn::Mlp, the inference session) compares the enum.
#pragma once

#include <string>
#include <vector>

namespace vit::nn {

// "gelu" (erf), "gelu_tanh", "quick_gelu" (x sigmoid(1.702x)), "relu".
enum class ActivationKind { Gelu, GeluTanh, QuickGelu, Relu };
struct ActivationName {
  ActivationKind kind;
  const char* name;
};
inline constexpr ActivationName kActivationNames[] = {{ActivationKind::Gelu, "gelu"},
                                                      {ActivationKind::GeluTanh, "gelu_tanh"},
                                                      {ActivationKind::QuickGelu, "quick_gelu"},
                                                      {ActivationKind::Relu, "relu"}};
// "[op] act must be gelu, gelu_tanh, quick_gelu or relu, got 'x'" for another name.
ActivationKind parse_activation(const std::string& name, const char* op = "mlp");
const char* activation_name(ActivationKind kind);
std::vector<std::string> activation_names();

}  // namespace vit::nn
