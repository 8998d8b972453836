// `vit predict`: top-k classes for image files, or raw logits for a .npy batch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/load_flags.h"
#include "cli/validators.h"
#include "core/output_file.h"
#include "core/printable.h"
#include "io/npy.h"

namespace vit::cli {

namespace {

struct PredictOptions : LoadFlags {
  std::vector<std::string> images;
  std::string tensor, out, save_input;
  int64_t top_k = 5, batch = 16;
  bool invert = false, overwrite = false;
};

void add_predict_flags(CLI::App* cmd, PredictOptions& o) {
  add_model_flags(cmd, o);
  cmd->add_option("images", o.images, "image files (PNG, JPEG, BMP, ...)");
  cmd->add_option("--tensor", o.tensor, "a float32 (B, C, H, W) .npy input instead of images");
  cmd->add_option("--out", o.out, "with --tensor: write the (B, K) float32 logits here as .npy");
  cmd->add_option("--save-input", o.save_input,
                  "with images: write the (B, C, H, W) float32 tensor the model was given (decoded and "
                  "preprocessed) here as .npy, to compare preprocessing with another runtime");
  cmd->add_flag("--overwrite", o.overwrite,
                "replace --out / --save-input if it exists (never an input: the checkpoint, --tensor)");
  cmd->add_option("--top-k", o.top_k, "classes to show")->capture_default_str()->check(kPositive);
  cmd->add_option("--batch-size", o.batch, "images per forward pass")->capture_default_str()->check(kPositive);
  cmd->add_flag("--invert", o.invert, "invert grey levels (dark digits on light paper -> MNIST style)");
}

// Which of a run's two weight sets answered (the one the run evaluated, unless --raw / --ema),
// said after the answers (an error stays the command's one line).
void say_weights(const infer::Predictor& model) {
  if (!model.loaded().weights_note.empty()) std::printf("weights: %s\n", model.loaded().weights_note.c_str());
}

// A .npy batch: its logits printed, or written to --out.
void predict_tensor(infer::Predictor& model, const PredictOptions& o, const OutputFile& out_file,
                    const std::vector<InputFile>& inputs) {
  const Tensor input = model.read_npy(o.tensor, "predict");
  std::vector<Tensor> parts;
  for (int64_t b = 0; b < input.size(0); b += o.batch) {
    parts.push_back(model.predict(input.slice(0, b, std::min(input.size(0), b + o.batch))));
  }
  const Tensor logits = parts.empty() ? Tensor::empty({0, model.config().num_classes}) : cat(parts, 0);
  if (!o.out.empty()) {
    check_output("predict", out_file, inputs, o.overwrite);  // again, just before writing
    io::save_npy(o.out, logits, o.overwrite ? Existing::Replace : Existing::Refuse);
    std::printf("wrote %s: logits %s (%s layout)\n", o.out.c_str(), shape_str(logits.shape()).c_str(),
                model.loaded().layout.c_str());
  } else {
    std::printf("%s\n", logits.to_string().c_str());
  }
  say_weights(model);
}

// Images [start, end) decoded into `batch` (B, C, S, S) in order; returns the indices of those that
// decoded. A bad file is reported and added to `failed` (one image alone: its error is the command's).
std::vector<size_t> read_chunk(const infer::Predictor& model, const PredictOptions& o, size_t start, size_t end,
                               Tensor& batch, std::vector<std::string>& failed) {
  const int64_t C = model.config().in_channels, S = model.config().image_size;
  std::vector<size_t> ok;
  for (size_t i = start; i < end; ++i) {
    try {
      data::Image image = data::read_image(o.images[i], o.max_pixels);
      if (o.invert) {
        for (auto& px : image.pixels) px = static_cast<uint8_t>(255 - px);
      }
      model.preprocess_into(image, batch.data<float>() + static_cast<int64_t>(ok.size()) * C * S * S);
      ok.push_back(i);
    } catch (const Error& e) {
      if (o.images.size() == 1) throw;  // one image: its error is the command's
      std::printf("%s\n  error: %s\n", o.images[i].c_str(), e.what());
      failed.push_back(o.images[i]);
    }
  }
  return ok;
}

// Image files in chunks of --batch-size: every image gets its answer or its error; a bad file does
// not hide the good ones, and the command exits non-zero at the end if any image failed.
void predict_images(infer::Predictor& model, const PredictOptions& o, const OutputFile& input_file,
                    const std::vector<InputFile>& inputs) {
  const int64_t C = model.config().in_channels, S = model.config().image_size;
  std::vector<std::string> failed;
  std::vector<Tensor> given;  // --save-input: every decoded image's tensor, in order
  for (size_t start = 0; start < o.images.size(); start += static_cast<size_t>(o.batch)) {
    const size_t end = std::min(o.images.size(), start + static_cast<size_t>(o.batch));
    Tensor batch = Tensor::empty({static_cast<int64_t>(end - start), C, S, S});
    const std::vector<size_t> ok = read_chunk(model, o, start, end, batch, failed);
    if (ok.empty()) continue;
    const Tensor logits = model.predict(batch.slice(0, 0, static_cast<int64_t>(ok.size())));
    if (!o.save_input.empty()) given.push_back(batch.slice(0, 0, static_cast<int64_t>(ok.size())).contiguous());
    const std::vector<std::vector<infer::ClassScore>> top = model.top_k(logits, o.top_k);
    for (size_t j = 0; j < ok.size(); ++j) {
      std::printf("%s\n", o.images[ok[j]].c_str());
      for (const infer::ClassScore& s : top[j]) {
        std::printf("  %6.2f%%  %s\n", 100.0 * s.probability, printable(model.label(s.index)).c_str());
      }
    }
    std::fflush(stdout);
  }
  if (failed.empty()) say_weights(model);
  VIT_CHECK(failed.empty(), "predict", "{} of {} images could not be read: {}{}", failed.size(), o.images.size(),
            fmt::join(failed, ", "), o.save_input.empty() ? "" : " (--save-input not written)");
  if (!o.save_input.empty()) {
    check_output("predict", input_file, inputs, o.overwrite);  // again, just before writing
    const Tensor all = cat(given, 0);
    io::save_npy(o.save_input, all, o.overwrite ? Existing::Replace : Existing::Refuse);
    std::printf("wrote %s: the input %s\n", o.save_input.c_str(), shape_str(all.shape()).c_str());
  }
}

void run_predict(const PredictOptions& o) {
  VIT_CHECK(o.images.empty() != o.tensor.empty(), "predict", "give image files or --tensor FILE.npy (not both)");
  VIT_CHECK(o.out.empty() || !o.tensor.empty(), "predict", "--out writes logits of a --tensor input");
  VIT_CHECK(o.save_input.empty() || o.tensor.empty(), "predict",
            "--save-input writes the tensor made of image files (a --tensor input is one already)");
  VIT_CHECK(!o.overwrite || !o.out.empty() || !o.save_input.empty(), "predict",
            "--overwrite replaces --out: give --out too");
  std::vector<InputFile> inputs = {{"the checkpoint", o.checkpoint}, {"the --tensor input", o.tensor}};
  for (const std::string& image : o.images) inputs.push_back({"an input image", image});
  const OutputFile out_file{"--out", o.out, "the .npy file", "--overwrite"};
  const OutputFile input_file{"--save-input", o.save_input, "the .npy file", "--overwrite"};
  if (!o.out.empty()) check_output("predict", out_file, inputs, o.overwrite);  // before the model is loaded
  if (!o.save_input.empty()) check_output("predict", input_file, inputs, o.overwrite);
  // The graph-free path; the model is only read from here on, so the mapped copy of every
  // packed weight can be dropped (resident memory ~1x the weights).
  infer::Predictor model = load_predictor(o, infer::Predictor::WeightPages::Release);
  model.require_classifier("predict", o.checkpoint, "it gives embeddings, with vit embed");
  model::check_memory(model.config(), std::min<int64_t>(o.batch, std::max<size_t>(o.images.size(), 1)), false);
  NoGradGuard no_grad;
  if (!o.tensor.empty()) {
    predict_tensor(model, o, out_file, inputs);
  } else {
    predict_images(model, o, input_file, inputs);
  }
}

}  // namespace

void add_predict_command(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  CLI::App* cmd = app.add_subcommand("predict", "classify images (PNG/JPEG) or run a .npy batch through a model");
  add_predict_flags(cmd, *o);
  cmd->callback([o] { run_predict(*o); });
}

}  // namespace vit::cli
