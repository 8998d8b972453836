// The models `vit serve` serves (the model repository): each has a name that URLs carry, a version,
// the file it came from, its model handle (infer::Predictor) and its own batcher.
//   - Naming: --checkpoint FILE (named after the file's stem), --model NAME=FILE (repeatable) and
//     --model-dir DIR (every regular file in it not starting with '.', named after its stem), in
//     that order (model_specs).
//   - Loading (load_models): each spec's name is checked (letters, digits, '_', '-', '.'; at most
//     128; unique) and its file loaded; a failure of either stops the start naming the model, or
//     with skip_failed is reported through `warn` and the model left out.
//   - Serving: ModelRegistry holds what loaded, in order; each model's batcher is made by the
//     server (serve/server.cpp), which owns the compute turns and metrics it reports to.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "infer/predictor.h"
#include "serve/batcher.h"

namespace vit::serve {

// A model to serve: its name and file.
struct ModelSpec {
  std::string name, file;
};

// The specs of the three ways of naming models. Throws "[serve] --model X: give NAME=FILE ...",
// "--model-dir D: not a directory" / "holds no model files", or when nothing is named.
std::vector<ModelSpec> model_specs(const std::string& checkpoint, const std::vector<std::string>& named,
                                   const std::string& model_dir);

// Letters, digits, '_', '-', '.', at most 128, not "." or "..".
bool valid_model_name(const std::string& name);

// A loaded model with its name.
struct NamedModel {
  std::string name;
  std::string file;
  infer::Predictor model;
};

using LoadModel = std::function<infer::Predictor(const std::string& file)>;

// Loads every spec (see above). Throws "[serve] model 'NAME' (FILE) does not load: ..." (or, with
// skip_failed, "none of the N models loaded" when none did).
std::vector<NamedModel> load_models(const std::vector<ModelSpec>& specs, const LoadModel& load, bool skip_failed,
                                    const std::function<void(const std::string&)>& warn);

// One served model and its queue.
struct ServedModel {
  std::string name, version = "1", file;
  infer::Predictor model;
  std::unique_ptr<Batcher> batcher;
  std::mutex attention;  // attention maps run the autograd model: one at a time
  ServedModel(std::string n, std::string f, infer::Predictor m)
      : name(std::move(n)), file(std::move(f)), model(std::move(m)) {}
  const model::ViTConfig& config() const { return model.config(); }
};

class ModelRegistry {
 public:
  // Throws "[serve] no model to serve", or for a bad or repeated name.
  explicit ModelRegistry(std::vector<NamedModel> models);
  ServedModel* find(const std::string& name) const;  // nullptr when not served
  // The model named, or the only one when none is named (name == nullptr); HttpError 404 for a
  // name not served, 400 when none is named and several are served (`how`: how to name one).
  ServedModel& pick(const std::string* name, const char* how) const;
  const std::vector<std::unique_ptr<ServedModel>>& all() const { return models_; }
  std::vector<std::string> names() const;
  std::string names_text() const;  // "a, b"

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
};

}  // namespace vit::serve
