// What a caller asks of a model: the request kinds every door (the `vit` commands, <vit/vit.h>,
// the Python module, `vit serve`) hands to infer::Predictor and the inference session, as enums
// parsed once at the door (never strings travelling down).
#pragma once

#include <string>
#include <vector>

namespace vit::infer {

// Which embedding: the class token (DeiT: with the distillation token), the mean of the patch
// tokens, or the whole final token sequence.
enum class Pool { Cls, Avg, Tokens };

// "cls" | "avg" | "tokens" -> Pool; throws "[op] pool must be cls, avg or tokens, got 'x'".
Pool parse_pool(const std::string& name, const char* op = "embed");
const char* pool_name(Pool pool);

// The arithmetic of the Linear layers: float32, or bfloat16 inputs with float32 accumulation
// (kernels/gemm/bf16_gemm.h; LayerNorm, softmax, attention and the residual stream stay float32).
enum class Precision { F32, BF16 };
// Named once: each precision's name (what flags, files and answers say) and the alias it accepts.
struct PrecisionName {
  Precision precision;
  const char* name;
  const char* alias;
};
inline constexpr PrecisionName kPrecisionNames[] = {{Precision::F32, "fp32", "float32"},
                                                    {Precision::BF16, "bf16", "bfloat16"}};
// A name or alias -> Precision; throws "[op] precision must be fp32 or bf16, got 'x'".
Precision parse_precision(const std::string& name, const char* op = "precision");
const char* precision_name(Precision precision);
std::vector<std::string> precision_names();  // {"fp32", "bf16"}

// What a batch is run for: logits of the classifier, or an embedding with its pooling.
enum class Output { Logits, Embedding };
struct Request {
  Output output = Output::Logits;
  Pool pool = Pool::Cls;  // with Output::Embedding
  bool operator==(const Request& other) const {
    return output == other.output && (output == Output::Logits || pool == other.pool);
  }
};
// "logits", "embed cls", ... (metrics, messages)
std::string request_name(const Request& request);

}  // namespace vit::infer
