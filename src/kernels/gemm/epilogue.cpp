// The epilogue's names and its reference activation (see epilogue.h).
#include "kernels/gemm/epilogue.h"

#include "kernels/activation.h"

namespace vit::kernels {

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::None:
      return "none";
    case Activation::Gelu:
      return "gelu";
    case Activation::GeluTanh:
      return "gelu_tanh";
    case Activation::Relu:
      return "relu";
  }
  return "?";
}

double activate_ref(Activation act, double x) {
  switch (act) {
    case Activation::Gelu:
      return unary_ref(Unary::Gelu, x);
    case Activation::GeluTanh:
      return unary_ref(Unary::GeluTanh, x);
    case Activation::Relu:
      return x > 0.0 ? x : 0.0;
    case Activation::None:
      break;
  }
  return x;
}

}  // namespace vit::kernels
