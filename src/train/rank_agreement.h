// What the ranks of an mpirun job must agree on (trainer.cpp; distributed::Comm carries the messages):
// that every rank started, with the lead's configuration and data; that their weights are still
// the same at epoch ends; and, at the end, how much of the gradient communication the backward
// pass hid. Without mpirun (one rank) these do nothing.
#pragma once

#include <exception>

#include "train/data_parallel.h"
#include "train/run.h"

namespace vit::train {

// Every rank's start went well (`failed` is this rank's error, if any; `run` is null then), and
// every rank has the lead's configuration and data; otherwise every rank stops, the ones that
// differ naming what.
void agree_on_start(Run* run, const std::exception_ptr& failed, distributed::Comm& comm);
// At epoch ends: the ranks' weights are still the same (each applies the same summed gradient;
// a difference would mean a broken reduction), compared by a hash.
void check_replicas_agree(const Run& run, int64_t epoch);
// "gradient sums: ... % of the communication hidden", after a distributed run.
void print_overlap(DataParallel& parallel, distributed::Comm& comm);

}  // namespace vit::train
