// The model repository of `vit serve` (Triton's model repository extension): which files the
// served models come from, and loading, reloading and unloading them while the server runs.
//   - --model-control none (default): the models given at the start serve until the end; the index
//     answers, load and unload are refused.
//   - explicit: POST /v2/repository/models/{name}/load (re)loads a model from its file (one named
//     at the start, or a file of --model-dir named after its stem, looked up when asked), .../unload
//     takes it out of service.
//   - poll: every --repository-poll-secs the files are looked at: a new file in --model-dir is
//     loaded, a changed file (size, modification time or inode) of a served model is loaded as its
//     next version, a file gone from --model-dir is unloaded. load/unload on request are refused.
// A (re)load never interrupts serving: the new version is loaded and prepared (weights packed,
// batcher started) beside the old one, then swapped in; requests that hold the old version finish
// on it and its memory is freed after the last. A file that does not load leaves the serving
// version in place, is reported in the index (reason) and on the log, and is tried again when it
// changes. A file that changes while it is read is tried again at the next poll (write model
// files elsewhere and rename them in).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "serve/models/registry.h"

namespace vit::serve {

enum class ModelControl { None, Explicit, Poll };
ModelControl parse_model_control(const std::string& text);  // throws naming the choices
const char* model_control_name(ModelControl c);

struct RepositoryOptions {
  ModelControl control = ModelControl::None;
  std::string model_dir;   // where new files are looked for ("" when none)
  double poll_secs = 5.0;  // poll: how often
};

class Repository {
 public:
  // Makes a loaded model servable (weights packed, its batcher started) before it is put in.
  using Prepare = std::function<void(ServedModel&)>;
  using Log = std::function<void(const std::string&)>;
  // `specs`: the models named at the start (already loaded into `registry`); `load` reads a file.
  Repository(ModelRegistry& registry, std::vector<ModelSpec> specs, LoadModel load, Prepare prepare,
             RepositoryOptions options, Log log);
  ~Repository();  // stops polling
  Repository(const Repository&) = delete;
  Repository& operator=(const Repository&) = delete;

  ModelControl control() const { return options_.control; }
  // Called after each load while serving, with its result (the metrics).
  void on_load(std::function<void(const std::string& name, bool ok)> counted) { counted_ = std::move(counted); }
  // Explicit control: (re)load a model by name / take it out of service. HttpError 400 under
  // another control, 404 for a name with no file; vit::Error when the file does not load.
  void load(const std::string& name);
  void unload(const std::string& name);
  // Poll control: one look at the files (the poller calls it; tests may too).
  void poll();
  // Stops the poller (the drain); idempotent.
  void stop();

 private:
  struct Stamp {
    uintmax_t size = 0;
    int64_t mtime_ns = 0;
    uintmax_t inode = 0;
    bool operator==(const Stamp&) const = default;
  };
  struct Known {
    std::string name, file;
    bool from_dir = false;
    Stamp tried;  // the file as it was when last loaded (or tried)
  };
  static bool stamp_of(const std::string& file, Stamp& out);
  std::vector<ModelSpec> dir_specs() const;  // --model-dir's files now
  Known* known(const std::string& name);
  // Loads `file` as the next version of `name` and swaps it in; throws what the load threw.
  void load_file(Known& k);
  void require(ModelControl c, const char* what) const;

  ModelRegistry& registry_;
  LoadModel load_;
  Prepare prepare_;
  RepositoryOptions options_;
  Log log_;
  std::function<void(const std::string&, bool)> counted_;
  std::mutex loading_;  // one load at a time
  std::vector<Known> known_;
  std::set<std::string> warned_;  // files passed over (a name taken), said once
  std::mutex stop_mutex_;
  std::condition_variable stop_wake_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace vit::serve
