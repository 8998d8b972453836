// Run folder files (see run_files.h).
#include "train/run_files.h"

#include <filesystem>
#include <fstream>

#include "core/check.h"

namespace vit::train {
namespace fs = std::filesystem;

RunFiles::RunFiles(const std::string& out_dir)
    : dir(out_dir),
      last((fs::path(out_dir) / "last.safetensors").string()),
      best((fs::path(out_dir) / "best.safetensors").string()),
      metrics((fs::path(out_dir) / "metrics.jsonl").string()),
      report((fs::path(out_dir) / "report.html").string()) {}

std::string RunFiles::last_good() const { return fs::exists(last) ? last : std::string("(none written yet)"); }

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
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& line : lines) out << line << "\n";
    out.flush();
    VIT_CHECK(out.good(), "train", "{}: cannot write", tmp);
  }
  fs::rename(tmp, path);
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

}  // namespace vit::train
