// The served models: naming, loading, finding (see registry.h).
#include "serve/models/registry.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "core/check.h"
#include "serve/router.h"

namespace vit::serve {

namespace fs = std::filesystem;

std::vector<ModelSpec> model_specs(const std::string& checkpoint, const std::vector<std::string>& named,
                                   const std::string& model_dir) {
  std::vector<ModelSpec> specs;
  if (!checkpoint.empty()) specs.push_back({fs::path(checkpoint).stem().string(), checkpoint});
  for (const std::string& spec : named) {
    const size_t eq = spec.find('=');
    VIT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(), "serve",
              "--model {}: give NAME=FILE (e.g. --model vit_b16=vit_b_16.pth)", spec);
    specs.push_back({spec.substr(0, eq), spec.substr(eq + 1)});
  }
  if (!model_dir.empty()) {
    std::error_code ec;
    VIT_CHECK(fs::is_directory(model_dir, ec), "serve", "--model-dir {}: not a directory", model_dir);
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
      if (entry.is_regular_file(ec) && entry.path().filename().string().front() != '.') files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    VIT_CHECK(!files.empty(), "serve", "--model-dir {}: holds no model files", model_dir);
    for (const fs::path& f : files) specs.push_back({f.stem().string(), f.string()});
  }
  VIT_CHECK(!specs.empty(), "serve", "no model to serve: give --checkpoint FILE, --model NAME=FILE or --model-dir DIR");
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
  VIT_CHECK(!models.empty(), "serve", "none of the {} models loaded", specs.size());
  return models;
}

ModelRegistry::ModelRegistry(std::vector<NamedModel> models) {
  VIT_CHECK(!models.empty(), "serve",
            "no model to serve (give --checkpoint FILE, --model NAME=FILE or --model-dir DIR)");
  std::vector<std::string> taken;
  for (NamedModel& m : models) {
    const std::string problem = name_problem({m.name, m.file}, taken);
    VIT_CHECK(problem.empty(), "serve", "{}", problem);
    taken.push_back(m.name);
    models_.push_back(std::make_unique<ServedModel>(m.name, m.file, std::move(m.model)));
  }
}

ServedModel* ModelRegistry::find(const std::string& name) const {
  for (const auto& m : models_) {
    if (m->name == name) return m.get();
  }
  return nullptr;
}

ServedModel& ModelRegistry::pick(const std::string* name, const char* how) const {
  if (name == nullptr) {
    if (models_.size() == 1) return *models_[0];
    throw HttpError{400, fmt::format("[serve] {} models are served ({}): {}", models_.size(), names_text(), how)};
  }
  ServedModel* m = find(*name);
  if (m == nullptr) throw HttpError{404, fmt::format("[serve] unknown model '{}' (served: {})", *name, names_text())};
  return *m;
}

std::vector<std::string> ModelRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& m : models_) out.push_back(m->name);
  return out;
}

std::string ModelRegistry::names_text() const { return fmt::format("{}", fmt::join(names(), ", ")); }

}  // namespace vit::serve
