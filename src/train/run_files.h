// The files of a training run in its --out folder: last.safetensors, best.safetensors,
// metrics.jsonl (one JSON object per epoch) and report.html, and the small helpers that keep
// metrics.jsonl consistent with the checkpoint a run resumes from.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/output_file.h"

namespace vit::train {

struct RunFiles {
  explicit RunFiles(const std::string& out_dir);
  std::string dir, last, best, metrics, report;
  // What a failure message points the user back to: the last checkpoint, if one exists.
  std::string last_good() const;
  // The files of a run already in dir that a new run would replace (an empty metrics.jsonl, left
  // by a run stopped before its first epoch, holds nothing to lose): their names, in this order.
  std::vector<std::string> holding_a_run() const;
  // Removes the temporary files (FILE.tmp.<pid>.<n>) of a run killed mid-write; only while
  // holding the folder's lock (RunLock), when no other run can be writing one.
  void remove_stale_temporaries() const;
  // A fresh run refuses a folder holding a run, naming --resume and --overwrite, unless overwrite.
  void refuse_to_replace(bool overwrite) const;
  // The run replaces its files: none may be a file it reads (--init, --teacher), by device and
  // inode, --overwrite or not (core/output_file.h's rule): "[train] --out RUN/best.safetensors is
  // the --init file itself: write the run's files to another path".
  void refuse_inputs(const std::vector<InputFile>& inputs) const;
  // Starts a fresh run (once its data and model are ready): the old run's best.safetensors and
  // report.html are removed and metrics.jsonl is emptied, so none can pass for the new run's;
  // last.safetensors stays until the new run's first save replaces it.
  void start_fresh() const;
};

// A file's identity and version (device, inode, size, modification time), to tell whether it
// changed: a failed save claims the previous checkpoint is unchanged only after checking.
struct FileVersion {
  explicit FileVersion(const std::string& path);
  bool exists = false;
  uint64_t device = 0, inode = 0;
  int64_t size = 0, modified_ns = 0;
  bool operator==(const FileVersion&) const = default;
};

// Appends one line to a file (metrics.jsonl); throws "[train] FILE: cannot write".
void append_line(const std::string& path, const std::string& line);
// Keeps the first `epochs` lines of metrics.jsonl (a resumed run rewrites what follows). The
// new file replaces the old by rename, so a kill at any moment leaves one or the other whole.
void truncate_metrics(const std::string& path, int64_t epochs);
// Every row of metrics.jsonl (none when the file is missing); a line that is not JSON throws
// "[train] FILE: line N ...".
std::vector<nlohmann::json> read_metrics(const std::string& path);

}  // namespace vit::train
