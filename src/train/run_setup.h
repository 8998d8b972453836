// Starting or resuming a run (trainer.cpp's first phases): the configuration (the checkpoint's
// when resuming, resume.h), the folder's lock, the data (held-out validation split, class names
// by name, the normalisation), the model, optimiser and EMA (restored when resuming), the
// teacher, and then the plan: the schedule's length and what the run is about to do.
#pragma once

#include "train/run.h"

namespace vit::train {

// Everything up to the plan; refuses what cannot fit in memory before any large allocation.
Run start_or_resume(TrainConfig config);
// The learning-rate schedule's length in steps, printed with what the run is about to do, and the
// milestones (and best accuracy) already passed before a resume.
void plan(Run& run);

}  // namespace vit::train
