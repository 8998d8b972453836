// vit::Error: what every part of vit throws on bad input, with an "[op] ..." prefix naming the
// operation and the offending file, key, shape or value. Public (the <vit/vit.h> facade and the
// library share it); derives from std::runtime_error.
#pragma once

#include <stdexcept>
#include <string>

namespace vit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Training stopped by SIGINT or SIGTERM after saving its checkpoint: what() says where it stopped
// and what was saved; run_dir() is the run to resume (`vit train --resume DIR`,
// vit::train_model({"--resume", DIR}), Python's vit.train(resume=DIR)).
class Interrupted : public Error {
 public:
  Interrupted(const std::string& what, int signal, std::string run_dir)
      : Error(what), signal_(signal), run_dir_(std::move(run_dir)) {}
  int signal() const { return signal_; }  // SIGINT or SIGTERM
  const std::string& run_dir() const { return run_dir_; }

 private:
  int signal_;
  std::string run_dir_;
};

}  // namespace vit
