// Run folder files (see run_files.h).
#include "train/run_files.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/check.h"
#include "io/safetensors.h"

namespace vit::train {
namespace fs = std::filesystem;

RunFiles::RunFiles(const std::string& out_dir)
    : dir(out_dir),
      last((fs::path(out_dir) / "last.safetensors").string()),
      best((fs::path(out_dir) / "best.safetensors").string()),
      metrics((fs::path(out_dir) / "metrics.jsonl").string()),
      report((fs::path(out_dir) / "report.html").string()) {}

std::string RunFiles::last_good() const { return fs::exists(last) ? last : std::string("(none written yet)"); }

std::vector<std::string> RunFiles::holding_a_run() const {
  std::vector<std::string> held;
  for (const std::string* path : {&last, &best, &metrics, &report}) {
    std::error_code ec;
    if (!fs::exists(*path, ec)) continue;
    if (path == &metrics && fs::is_regular_file(*path, ec) && fs::file_size(*path, ec) == 0) continue;
    held.push_back(fs::path(*path).filename().string());
  }
  return held;
}

void RunFiles::remove_stale_temporaries() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string* file : {&last, &best, &metrics, &report}) {
      if (name.rfind(fs::path(*file).filename().string() + ".tmp", 0) == 0) fs::remove(entry.path(), ec);
    }
  }
}

void RunFiles::refuse_to_replace(bool overwrite) const {
  const std::vector<std::string> held = holding_a_run();
  if (!held.empty() && !overwrite) {
    std::string names = held[0];
    for (size_t i = 1; i < held.size(); ++i) names += ", " + held[i];
    fail("train", "{} already holds a run ({}); {}start over with --overwrite (replaces it), or choose another --out",
         dir, names, fs::exists(last) ? fmt::format("continue it with --resume {}, ", dir) : std::string());
  }
}

void RunFiles::refuse_inputs(const std::vector<InputFile>& inputs) const {
  for (const std::string* path : {&last, &best, &metrics, &report}) {
    if (fs::exists(*path)) check_output("train", {"--out", *path, "the run's files", "--overwrite"}, inputs, true);
  }
}

void RunFiles::start_fresh() const {
  fs::create_directories(dir);
  for (const std::string* path : {&best, &report}) {
    std::error_code ec;
    fs::remove(*path, ec);
    VIT_CHECK(!ec, "train", "{}: cannot remove the replaced run's file ({})", *path, ec.message());
  }
  std::ofstream out(metrics, std::ios::trunc);
  VIT_CHECK(out.good(), "train", "{}: cannot write", metrics);
}

FileVersion::FileVersion(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  exists = true;
  device = st.st_dev;
  inode = st.st_ino;
  size = st.st_size;
  modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

void append_line(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
  VIT_CHECK(out.good(), "train", "{}: cannot write", path);
}

// (Found by the SIGKILL test: truncating in place could lose every line.)
void truncate_metrics(const std::string& path, int64_t epochs) {
  if (!fs::exists(path)) return;
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line) && static_cast<int64_t>(lines.size()) < epochs;) lines.push_back(line);
  in.close();
  const std::string tmp = io::temp_path(path);
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& line : lines) out << line << "\n";
    out.close();
    if (!out.good()) {
      fs::remove(tmp);
      fail("train", "{}: cannot write", tmp);
    }
  }
  fs::rename(tmp, path);
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty()) continue;
    try {
      rows.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      fail("train", "{}: line {} is not a JSON object ({})", path, number, e.what());
    }
  }
  return rows;
}

}  // namespace vit::train
