// The models `vit serve` serves (the model repository): each has a name that URLs carry, a version,
// the file it came from, its model handle (infer::Predictor) and its own batcher.
//   - Naming: --checkpoint FILE (named after the file's stem), --model NAME=FILE (repeatable) and
//     --model-dir DIR (every regular file in it not starting with '.', named after its stem), in
//     that order (model_specs).
//   - Loading (load_models): each spec's name is checked (letters, digits, '_', '-', '.'; at most
//     128; unique) and its file loaded; a failure of either stops the start naming the model, or
//     with skip_failed is reported through `warn` and the model left out.
//   - Serving: ModelRegistry holds what serves, by name, one version each (swapped live by the
//     model repository: serve/models/repository.h); each version's batcher is made by the server
//     (serve/server.cpp), which owns the compute turns and metrics it reports to.
#pragma once

#include <atomic>
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
// allow_empty_dir: an empty --model-dir is not an error (models may be added while serving).
std::vector<ModelSpec> model_specs(const std::string& checkpoint, const std::vector<std::string>& named,
                                   const std::string& model_dir, bool allow_empty_dir = false);
// The model files of a directory now (regular files, not hidden, not a writer's FILE.tmp.*, not the
// external data X.onnx.data of an X.onnx beside it), sorted,
// each named after its stem. Throws "--model-dir D: not a directory".
std::vector<ModelSpec> dir_models(const std::string& model_dir);

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

// One version of a served model and its queue. Requests hold it (a ModelHandle) while they run:
// a version swapped out or unloaded finishes what it holds and is freed with its last request.
struct ServedModel {
  std::string name, version = "1", file;
  infer::Predictor model;
  std::unique_ptr<Batcher> batcher;
  std::mutex attention;              // attention maps run the autograd model: one at a time
  std::atomic<bool> retired{false};  // swapped out or unloaded while serving: its freeing is logged
  ServedModel(std::string n, std::string f, infer::Predictor m)
      : name(std::move(n)), file(std::move(f)), model(std::move(m)) {}
  const model::ViTConfig& config() const { return model.config(); }
};
using ModelHandle = std::shared_ptr<ServedModel>;

// A handle whose last release also hands freed memory back to the system (malloc_trim): a swapped-
// out version's weights do not stay in the allocator's free lists.
ModelHandle make_handle(std::string name, std::string file, infer::Predictor model);

// What the repository index says of a model (Triton's states: READY, UNAVAILABLE, LOADING).
struct ModelStatus {
  std::string name, version, state, reason;
};

// The models being served, by name, each at one version at a time; thread-safe. Names keep the
// order they were first put in; a name unloaded or failing to load stays in the index.
class ModelRegistry {
 public:
  // Throws "[serve] no model to serve" (unless allow_empty), or for a bad or repeated name (each is
  // version 1).
  explicit ModelRegistry(std::vector<NamedModel> models, bool allow_empty = false);
  ModelHandle find(const std::string& name) const;  // the serving version, or nullptr
  // The model named, or the only one when none is named (name == nullptr); HttpError 404 for a
  // name not served, 400 when none is named and several are served (`how`: how to name one).
  ModelHandle pick(const std::string* name, const char* how) const;
  // 404's text for a name not served: unknown, or known and why it is not serving.
  std::string not_served(const std::string& name) const;
  std::vector<ModelHandle> all() const;  // those serving, in order
  std::vector<std::string> names() const;
  std::string names_text() const;  // "a, b"

  // The version number a new load of `name` gets (one past the last given; 1 for a new name).
  int64_t next_version(const std::string& name) const;
  // Puts a version in service (READY); returns the one it replaced (nullptr when none).
  ModelHandle put(ModelHandle m);
  // Takes a name out of service (UNAVAILABLE, `reason`); returns what was serving.
  ModelHandle remove(const std::string& name, const std::string& reason);
  // Records a state without changing what serves (LOADING; a failed load's reason).
  void note(const std::string& name, const std::string& state, const std::string& reason);
  std::vector<ModelStatus> index() const;

 private:
  struct Entry {
    std::string name;
    ModelHandle serving;
    int64_t last_version = 0;
    std::string state, reason;
  };
  Entry* entry(const std::string& name);
  const Entry* entry(const std::string& name) const;
  Entry& entry_or_add(const std::string& name);
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace vit::serve
