// The served models: naming, loading, finding (see registry.h).
#include "serve/models/registry.h"

#include <fmt/ranges.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "core/check.h"
#include "serve/router.h"

namespace vit::serve {

namespace fs = std::filesystem;

std::vector<ModelSpec> model_specs(const std::string& checkpoint, const std::vector<std::string>& named,
                                   const std::string& model_dir, bool allow_empty_dir) {
  std::vector<ModelSpec> specs;
  if (!checkpoint.empty()) specs.push_back({fs::path(checkpoint).stem().string(), checkpoint});
  for (const std::string& spec : named) {
    const size_t eq = spec.find('=');
    VIT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(), "serve",
              "--model {}: give NAME=FILE (e.g. --model vit_b16=vit_b_16.pth)", spec);
    specs.push_back({spec.substr(0, eq), spec.substr(eq + 1)});
  }
  if (!model_dir.empty()) {
    const std::vector<ModelSpec> files = dir_models(model_dir);
    VIT_CHECK(!files.empty() || allow_empty_dir, "serve", "--model-dir {}: holds no model files", model_dir);
    specs.insert(specs.end(), files.begin(), files.end());
  }
  VIT_CHECK(!specs.empty() || (allow_empty_dir && !model_dir.empty()), "serve",
            "no model to serve: give --checkpoint FILE, --model NAME=FILE or --model-dir DIR");
  return specs;
}

std::vector<ModelSpec> dir_models(const std::string& model_dir) {
  std::error_code ec;
  VIT_CHECK(fs::is_directory(model_dir, ec), "serve", "--model-dir {}: not a directory", model_dir);
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    const std::string base = entry.path().filename().string();
    // Hidden files and the temporaries of files being written (vit's FILE.tmp.PID.N) are not models.
    // Nor is an ONNX model's external data, X.onnx.data beside X.onnx (vit export --external-data).
    const bool external_data = base.size() > 10 && base.compare(base.size() - 10, 10, ".onnx.data") == 0 &&
                               fs::exists(entry.path().parent_path() / base.substr(0, base.size() - 5), ec);
    if (entry.is_regular_file(ec) && base.front() != '.' && base.find(".tmp.") == std::string::npos && !external_data) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<ModelSpec> specs;
  for (const fs::path& f : files) specs.push_back({f.stem().string(), f.string()});
  return specs;
}

bool valid_model_name(const std::string& name) {
  return !name.empty() && name.size() <= 128 && name != "." && name != ".." &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") ==
             std::string::npos;
}

namespace {

// Why a model of this name cannot be served beside `taken` ("" when it can).
std::string name_problem(const ModelSpec& spec, const std::vector<std::string>& taken) {
  if (!valid_model_name(spec.name)) {
    return fmt::format("model name '{}' ({}): use letters, digits, '_', '-' and '.' (at most 128), as URLs carry it",
                       spec.name, spec.file);
  }
  if (std::find(taken.begin(), taken.end(), spec.name) != taken.end()) {
    return fmt::format("two models are named '{}' ({}): give each its own name (--model NAME=FILE)", spec.name,
                       spec.file);
  }
  return "";
}

}  // namespace

std::vector<NamedModel> load_models(const std::vector<ModelSpec>& specs, const LoadModel& load, bool skip_failed,
                                    const std::function<void(const std::string&)>& warn) {
  std::vector<NamedModel> models;
  std::vector<std::string> taken;
  for (const ModelSpec& spec : specs) {
    std::string problem = name_problem(spec, taken);
    if (problem.empty()) {
      try {
        models.push_back({spec.name, spec.file, load(spec.file)});
        taken.push_back(spec.name);
        continue;
      } catch (const std::exception& e) {
        problem = fmt::format("model '{}' ({}) does not load: {}", spec.name, spec.file, e.what());
      }
    }
    if (!skip_failed) fail("serve", "{}", problem);
    warn(fmt::format("warning: [serve] {}; serving without it", problem));
  }
  VIT_CHECK(!models.empty() || specs.empty(), "serve", "none of the {} models loaded", specs.size());
  return models;
}

ModelHandle make_handle(std::string name, std::string file, infer::Predictor model) {
  return ModelHandle(new ServedModel(std::move(name), std::move(file), std::move(model)), [](ServedModel* m) {
    const std::string what = fmt::format("model '{}' version {}", m->name, m->version);
    const bool retired = m->retired;
    delete m;
    malloc_trim(0);
    if (retired) std::fprintf(stderr, "vit serve: %s freed (its last request answered)\n", what.c_str());
  });
}

ModelRegistry::ModelRegistry(std::vector<NamedModel> models, bool allow_empty) {
  VIT_CHECK(!models.empty() || allow_empty, "serve",
            "no model to serve (give --checkpoint FILE, --model NAME=FILE or --model-dir DIR)");
  std::vector<std::string> taken;
  for (NamedModel& m : models) {
    const std::string problem = name_problem({m.name, m.file}, taken);
    VIT_CHECK(problem.empty(), "serve", "{}", problem);
    taken.push_back(m.name);
    put(make_handle(m.name, m.file, std::move(m.model)));
  }
}

ModelRegistry::Entry* ModelRegistry::entry(const std::string& name) {
  for (Entry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const ModelRegistry::Entry* ModelRegistry::entry(const std::string& name) const {
  return const_cast<ModelRegistry*>(this)->entry(name);
}

ModelHandle ModelRegistry::find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const Entry* e = entry(name);
  return e != nullptr ? e->serving : nullptr;
}

std::string ModelRegistry::not_served(const std::string& name) const {
  const std::string served = names_text();
  std::lock_guard lock(mutex_);
  const Entry* e = entry(name);
  if (e == nullptr || e->serving != nullptr) {
    return fmt::format("unknown model '{}' (served: {})", name, served.empty() ? "none" : served);
  }
  return fmt::format("model '{}' is not being served ({}{}; served: {})", name, e->state,
                     e->reason.empty() ? "" : ": " + e->reason, served.empty() ? "none" : served);
}

ModelHandle ModelRegistry::pick(const std::string* name, const char* how) const {
  if (name == nullptr) {
    const std::vector<ModelHandle> serving = all();
    if (serving.size() == 1) return serving[0];
    if (serving.empty()) throw HttpError{404, "[serve] no model is being served"};
    throw HttpError{400, fmt::format("[serve] {} models are served ({}): {}", serving.size(), names_text(), how)};
  }
  ModelHandle m = find(*name);
  if (m == nullptr) throw HttpError{404, "[serve] " + not_served(*name)};
  return m;
}

std::vector<ModelHandle> ModelRegistry::all() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelHandle> out;
  for (const Entry& e : entries_) {
    if (e.serving) out.push_back(e.serving);
  }
  return out;
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> out;
  for (const ModelHandle& m : all()) out.push_back(m->name);
  return out;
}

std::string ModelRegistry::names_text() const { return fmt::format("{}", fmt::join(names(), ", ")); }

int64_t ModelRegistry::next_version(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const Entry* e = entry(name);
  return e != nullptr ? e->last_version + 1 : 1;
}

ModelRegistry::Entry& ModelRegistry::entry_or_add(const std::string& name) {
  if (Entry* e = entry(name)) return *e;
  entries_.push_back({name, nullptr, 0, "", ""});
  return entries_.back();
}

ModelHandle ModelRegistry::put(ModelHandle m) {
  std::lock_guard lock(mutex_);
  Entry* e = &entry_or_add(m->name);
  m->version = std::to_string(e->last_version + 1);
  e->last_version += 1;
  e->state = "READY";
  e->reason.clear();
  std::swap(e->serving, m);
  return m;
}

ModelHandle ModelRegistry::remove(const std::string& name, const std::string& reason) {
  std::lock_guard lock(mutex_);
  Entry* e = entry(name);
  if (e == nullptr) return nullptr;
  e->state = "UNAVAILABLE";
  e->reason = reason;
  return std::exchange(e->serving, nullptr);
}

void ModelRegistry::note(const std::string& name, const std::string& state, const std::string& reason) {
  std::lock_guard lock(mutex_);
  Entry* e = &entry_or_add(name);
  e->state = state;
  e->reason = reason;
}

std::vector<ModelStatus> ModelRegistry::index() const {
  std::lock_guard lock(mutex_);
  std::vector<ModelStatus> out;
  for (const Entry& e : entries_) {
    out.push_back({e.name, e.serving ? e.serving->version : "", e.state, e.reason});
  }
  return out;
}

}  // namespace vit::serve
