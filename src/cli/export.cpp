// `vit export IN OUT.onnx`: any model vit loads as an ONNX model (infer/onnx_export.h).
#include <cstdio>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "cli/validators.h"
#include "infer/onnx_export.h"

namespace vit::cli {

void add_export_command(CLI::App& app) {
  struct Options : LoadFlags {
    std::string out, precision = "float32";
    int64_t opset = 17;
    int bits = 7;
    bool overwrite = false;
    bool external_data = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "write a model as ONNX (input 'input' (batch, C, H, W); outputs 'logits' and 'embedding'; class names and "
      "preprocessing in its metadata): any checkpoint vit loads, float32 or int8 (ONNX Runtime's dynamic int8)");
  cmd->add_option("checkpoint", o->checkpoint,
                  "the model: ours (float or int8), timm / torchvision / Hugging Face / JAX weights, or an .onnx file")
      ->required();
  cmd->add_option("out", o->out, "the .onnx file to write")->required();
  add_load_options(cmd, *o,
                   {"layout", "heads", "eps", "act", "image_size", "strict", "ema", "raw", "allow_nonfinite", "resize",
                    "crop", "interpolation", "mean", "std"});
  cmd->add_option("--opset", o->opset, "ONNX opset, 13 to 17 (17: LayerNormalization; below it, its decomposition)")
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "float32, or int8: Linear weights int8 per output channel (an int8 checkpoint is written as it is), "
                  "as DynamicQuantizeLinear + MatMulInteger, which ONNX Runtime fuses into DynamicQuantizeMatMul")
      ->capture_default_str();
  CLI::Option* bits = cmd->add_option("--bits", o->bits,
                                      "int8 weight bits when quantizing here: 7 ([-63, 63], safe on every CPU), or 8 "
                                      "(for CPUs with VNNI only: ONNX Runtime's AVX2 int8 kernel saturates on 8-bit "
                                      "weights)")
                          ->check(CLI::IsMember({7, 8}))
                          ->capture_default_str();
  cmd->add_flag("--external-data", o->external_data,
                "the weights in OUT.data beside the model (ONNX's external data; automatic above 1.5 GiB, which one "
                "ONNX file cannot hold past 2 GiB)");
  cmd->add_flag("--overwrite", o->overwrite, "replace OUT (and OUT.data) if it exists");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(kThreads);
  cmd->callback([o, bits] {
    VIT_CHECK(o->precision == "int8" || bits->count() == 0, "export", "--bits {} is for --precision int8", o->bits);
    (void)infer::parse_export_int8(o->precision);
    set_threads(o->threads);
    infer::ExportOptions options;
    options.opset = o->opset;
    options.int8 = infer::parse_export_int8(o->precision);
    options.bits = o->bits;
    options.overwrite = o->overwrite;
    options.external_data = o->external_data;
    const infer::ExportResult r = infer::export_onnx(o->checkpoint, o->out, o->settings(), options);
    std::string outputs;
    for (const std::string& name : r.outputs) outputs += (outputs.empty() ? "" : ", ") + name;
    std::printf("exported %s (%s, %s layout) -> %s in %.2f s\n", o->checkpoint.c_str(), r.family.c_str(),
                r.layout.c_str(), o->out.c_str(), r.seconds);
    std::printf("  ONNX opset %ld, %s%s, %ld nodes, %ld initializers, %.1f MB; outputs: %s (batch dimension dynamic)\n",
                o->opset, r.precision.c_str(),
                r.quantized_linears > 0 ? (" (" + std::to_string(r.quantized_linears) + " int8 Linears, " +
                                           std::to_string(r.weight_bits) + "-bit weights)")
                                              .c_str()
                                        : "",
                r.nodes, r.initializers, static_cast<double>(r.bytes) / 1e6, outputs.c_str());
    if (!r.data_file.empty()) {
      std::printf("  weights in %s (%.1f MB, external data: keep it beside the model)\n", r.data_file.c_str(),
                  static_cast<double>(r.data_bytes) / 1e6);
    }
    if (r.weight_bits == 8) {
      std::fprintf(stderr,
                   "note: 8-bit int8 weights: ONNX Runtime's int8 kernel on CPUs without VNNI (AVX2) saturates on "
                   "them; for those, export from the float model (7-bit weights, the default) or quantize with "
                   "--bits 7\n");
    }
    std::printf(
        "  checked by ONNX's checker; input 'input' float32 (batch, C, H, W), preprocessed as metadata "
        "'vit.preprocess' says\n");
  });
}

}  // namespace vit::cli
