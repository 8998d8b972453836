// `vit convert IN OUT.safetensors`: any file vit reads (a PyTorch .pth/.bin, a JAX .npz, a foreign
// safetensors) written once as one of our checkpoints (infer/quantize_file.h: convert_file), which
// then memory-maps in no time and carries its config, layout, family, classes and preprocessing.
#include <cstdio>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "cli/validators.h"
#include "infer/quantize_file.h"

namespace vit::cli {
namespace {

// Every load option but --precision (a file is written, not run).
std::vector<std::string> convert_options() {
  std::vector<std::string> names;
  for (const infer::LoadOption& option : infer::load_option_table()) {
    if (option.name != "precision") names.push_back(option.name);
  }
  return names;
}

}  // namespace

void add_convert_command(CLI::App& app) {
  struct Options {
    LoadFlags model;
    std::string out;
    bool overwrite = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "write any checkpoint vit reads (a PyTorch .pth/.bin, a JAX .npz, a timm/torchvision/Hugging Face "
      ".safetensors) as one of our .safetensors checkpoints, with its config and preprocessing in the metadata");
  LoadFlags& m = o->model;
  cmd->add_option("input", m.checkpoint, "the file to convert")->required();
  cmd->add_option("output", o->out, "the checkpoint to write (.safetensors)")->required();
  // vit predict's load options but --precision: --heads, --layout, --ema, the preprocessing it records, ...
  add_load_options(cmd, m, convert_options());
  cmd->add_flag("--overwrite", o->overwrite, "replace the output if it exists");
  cmd->add_option("--threads", m.threads, "threads (0: all cores)")->check(kThreads);
  cmd->callback([o] {
    set_threads(o->model.threads);
    const infer::QuantizeFileResult r = infer::convert_file(
        o->model.checkpoint, o->out, o->model.settings(), o->overwrite, {.out = "output", .overwrite = "--overwrite"});
    std::printf("converted %s (%s layout) -> %s in %.2f s (%.1f MB -> %.1f MB)\n", o->model.checkpoint.c_str(),
                r.layout.c_str(), o->out.c_str(), r.seconds, static_cast<double>(r.in_bytes) / 1e6,
                static_cast<double>(r.out_bytes) / 1e6);
  });
}

}  // namespace vit::cli
