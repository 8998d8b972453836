// Progress bar (see progress.h).
#include "train/progress.h"

#include <cstdio>

namespace vit::train {

Progress::Progress(bool enabled, std::string label, size_t total)
    : enabled_(enabled), label_(std::move(label)), total_(total) {}

void Progress::update(size_t done, double loss, double accuracy, double images_per_s, double seconds) {
  if (!enabled_ || (seconds - last_draw_ < 0.1 && done != total_)) return;
  last_draw_ = seconds;
  constexpr int kWidth = 24;
  const double fraction = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  const double eta = done ? seconds / static_cast<double>(done) * static_cast<double>(total_ - done) : 0.0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::printf("\r%s [%s] %zu/%zu  loss %.4f  acc %5.2f%%  %5.0f img/s  ETA %4.1fs ", label_.c_str(), bar.c_str(), done,
              total_, loss, 100.0 * accuracy, images_per_s, eta);
  std::fflush(stdout);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) std::printf("\r\033[K");
  drawn_ = false;
}

}  // namespace vit::train
