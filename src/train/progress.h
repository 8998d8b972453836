// Per-epoch progress: a redrawn bar (step/steps, loss, accuracy, images/s, ETA) on a
// terminal; nothing per step otherwise (the trainer prints one plain line per epoch).
#pragma once

#include <string>

namespace vit::train {

class Progress {
 public:
  Progress(bool enabled, std::string label, size_t total);
  void update(size_t done, double loss, double accuracy, double images_per_s, double seconds);
  void finish();  // ends the bar's line (idempotent)

 private:
  bool enabled_;
  std::string label_;
  size_t total_;
  bool drawn_ = false;
  double last_draw_ = -1.0;
};

}  // namespace vit::train
