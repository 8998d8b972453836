// The model repository: loading, reloading and unloading while serving (see repository.h).
#include "serve/models/repository.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "serve/router.h"

namespace vit::serve {

ModelControl parse_model_control(const std::string& text) {
  if (text == "none") return ModelControl::None;
  if (text == "explicit") return ModelControl::Explicit;
  if (text == "poll") return ModelControl::Poll;
  fail("serve", "--model-control {}: choose none, explicit or poll", text);
}

const char* model_control_name(ModelControl c) {
  switch (c) {
    case ModelControl::Explicit:
      return "explicit";
    case ModelControl::Poll:
      return "poll";
    default:
      return "none";
  }
}

Repository::Repository(ModelRegistry& registry, std::vector<ModelSpec> specs, LoadModel load, Prepare prepare,
                       RepositoryOptions options, Log log)
    : registry_(registry),
      load_(std::move(load)),
      prepare_(std::move(prepare)),
      options_(std::move(options)),
      log_(std::move(log)) {
  VIT_CHECK(options_.poll_secs > 0 && options_.poll_secs <= 86400, "serve",
            "--repository-poll-secs must be in (0, 86400], got {}", options_.poll_secs);
  VIT_CHECK(options_.control != ModelControl::Poll || !options_.model_dir.empty(), "serve",
            "--model-control poll watches --model-dir: give one");
  const std::vector<ModelSpec> in_dir =
      options_.model_dir.empty() ? std::vector<ModelSpec>{} : dir_models(options_.model_dir);
  for (const ModelSpec& s : specs) {
    if (known(s.name) != nullptr) continue;
    Known k{s.name, s.file, false, {}};
    k.from_dir = std::any_of(in_dir.begin(), in_dir.end(), [&](const ModelSpec& d) { return d.file == s.file; });
    stamp_of(s.file, k.tried);  // as it was loaded at the start (or failed to)
    known_.push_back(k);
    if (!registry_.find(s.name) && valid_model_name(s.name)) {
      registry_.note(s.name, "UNAVAILABLE", fmt::format("{} did not load at the start (see the log)", s.file));
    }
  }
  if (options_.control == ModelControl::Poll) {
    poller_ = std::thread([this] {
      std::unique_lock lock(stop_mutex_);
      const auto every = std::chrono::duration<double>(options_.poll_secs);
      while (!stop_wake_.wait_for(lock, every, [this] { return stopping_; })) {
        lock.unlock();
        poll();
        lock.lock();
      }
    });
  }
}

Repository::~Repository() { stop(); }

void Repository::stop() {
  {
    std::lock_guard lock(stop_mutex_);
    stopping_ = true;
  }
  stop_wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

bool Repository::stamp_of(const std::string& file, Stamp& out) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return false;
  out = {static_cast<uintmax_t>(st.st_size), int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec,
         static_cast<uintmax_t>(st.st_ino)};
  return true;
}

std::vector<ModelSpec> Repository::dir_specs() const {
  if (options_.model_dir.empty()) return {};
  return dir_models(options_.model_dir);
}

Repository::Known* Repository::known(const std::string& name) {
  for (Known& k : known_) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

void Repository::require(ModelControl c, const char* what) const {
  if (options_.control == c) return;
  throw HttpError{400, fmt::format("[serve] {} on request needs --model-control explicit (this server's is {})", what,
                                   model_control_name(options_.control))};
}

void Repository::load_file(Known& k) {
  Stamp before;
  VIT_CHECK(stamp_of(k.file, before), "serve", "model '{}': {} is gone", k.name, k.file);
  k.tried = before;
  const ModelHandle serving = registry_.find(k.name);
  const int64_t version = registry_.next_version(k.name);
  if (!serving) registry_.note(k.name, "LOADING", fmt::format("version {} from {}", version, k.file));
  try {
    ModelHandle m = make_handle(k.name, k.file, load_(k.file));
    prepare_(*m);
    Stamp after;
    if (!stamp_of(k.file, after) || !(after == before)) {
      k.tried = {};  // tried again at the next look
      fail("serve", "model '{}': {} changed while it was read (write it elsewhere and rename it in)", k.name, k.file);
    }
    if (const ModelHandle old = registry_.put(m)) old->retired = true;
    if (counted_) counted_(k.name, true);
    log_(fmt::format(
        "vit serve: model '{}' version {} loaded from {}{}", k.name, m->version, k.file,
        serving ? fmt::format(" (version {} finishes its requests, then is freed)", serving->version) : ""));
  } catch (const std::exception& e) {
    if (counted_) counted_(k.name, false);
    const std::string why = fmt::format("version {} from {} does not load: {}", version, k.file, e.what());
    registry_.note(k.name, serving ? "READY" : "UNAVAILABLE",
                   serving ? fmt::format("{}; version {} serves", why, serving->version) : why);
    log_(fmt::format("vit serve: model '{}' {}{}", k.name, why,
                     serving ? fmt::format("; version {} still serves", serving->version) : ""));
    throw;
  }
}

void Repository::load(const std::string& name) {
  require(ModelControl::Explicit, "loading a model");
  std::lock_guard lock(loading_);
  Known* k = known(name);
  if (k == nullptr) {  // a file of --model-dir named after its stem, looked up now
    for (const ModelSpec& s : dir_specs()) {
      if (s.name == name && valid_model_name(name)) {
        known_.push_back({s.name, s.file, true, {}});
        k = &known_.back();
      }
    }
  }
  if (k == nullptr) {
    throw HttpError{404, fmt::format("[serve] no model '{}' in the repository (models named at the start{})", name,
                                     options_.model_dir.empty() ? "" : ", or a file of " + options_.model_dir)};
  }
  load_file(*k);
}

void Repository::unload(const std::string& name) {
  require(ModelControl::Explicit, "unloading a model");
  std::lock_guard lock(loading_);
  const ModelHandle was = registry_.remove(name, "unloaded");
  if (!was) throw HttpError{404, "[serve] " + registry_.not_served(name)};
  was->retired = true;
  log_(fmt::format("vit serve: model '{}' version {} unloaded (it finishes its requests, then is freed)", name,
                   was->version));
}

void Repository::poll() {
  std::lock_guard lock(loading_);
  std::vector<ModelSpec> now;
  try {
    now = dir_specs();
  } catch (const std::exception& e) {
    log_(fmt::format("vit serve: cannot read the model repository: {}", e.what()));
    return;
  }
  for (const ModelSpec& s : now) {
    const Known* k = known(s.name);
    if (k == nullptr && valid_model_name(s.name)) {
      known_.push_back({s.name, s.file, true, {}});
    } else if (k == nullptr && warned_.insert(s.file).second) {
      log_(
          fmt::format("vit serve: {} is not loaded: its name '{}' is not a model name (letters, digits, '_', '-', "
                      "'.'; at most 128)",
                      s.file, s.name));
    } else if (k != nullptr && k->file != s.file && warned_.insert(s.file).second) {
      log_(fmt::format("vit serve: {} is not loaded: model '{}' comes from {} (one file per name)", s.file, s.name,
                       k->file));
    }
  }
  for (Known& k : known_) {
    Stamp st;
    const bool there = stamp_of(k.file, st);
    const bool listed = std::any_of(now.begin(), now.end(), [&](const ModelSpec& s) { return s.file == k.file; });
    if (k.from_dir && (!there || !listed)) {
      if (const ModelHandle was = registry_.remove(k.name, fmt::format("{} was removed", k.file))) {
        was->retired = true;
        log_(fmt::format("vit serve: model '{}' version {} unloaded: {} was removed", k.name, was->version, k.file));
      }
      k.tried = {};
      continue;
    }
    if (!there || st == k.tried) continue;
    try {
      load_file(k);
    } catch (const std::exception&) {  // reported by load_file; tried again when the file changes
    }
  }
  known_.erase(std::remove_if(known_.begin(), known_.end(),
                              [&](const Known& k) {
                                return k.from_dir && k.tried == Stamp{} && registry_.find(k.name) == nullptr &&
                                       std::none_of(now.begin(), now.end(),
                                                    [&](const ModelSpec& s) { return s.file == k.file; });
                              }),
               known_.end());
}

}  // namespace vit::serve
