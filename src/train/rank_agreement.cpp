// What the ranks of an mpirun job must agree on (see rank_agreement.h).
#include "train/rank_agreement.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/checksum.h"

namespace vit::train {

void agree_on_start(Run* run, const std::exception_ptr& failed, distributed::Comm& comm) {
  std::vector<double> failures = {failed ? 1.0 : 0.0};
  comm.sum(failures);
  if (failed) std::rethrow_exception(failed);
  if (failures[0] > 0)
    fail("train", "{} of the {} ranks could not start (their messages say why); stopping them all",
         static_cast<int64_t>(failures[0]), comm.size());
  const TrainConfig& c = run->config;
  // What must be the same everywhere: the run's saved configuration (minus the data's path,
  // which may differ between hosts), the model, the data and the normalisation.
  nlohmann::json mine = nlohmann::json::parse(c.to_json());
  mine.erase("data_dir");
  mine["model"] = nlohmann::json::parse(c.model.to_json());
  mine["data"] = nlohmann::json::parse(run->data.fingerprint);
  mine["normalization"] = {run->data.norm.mean, run->data.norm.std};
  mine["resumed_at_step"] = run->step;
  std::string lead = mine.dump();
  comm.broadcast(lead);
  const nlohmann::json theirs = nlohmann::json::parse(lead);
  std::vector<std::string> differences;
  for (const auto& [key, value] : theirs.items()) {
    if (!mine.contains(key) || mine[key] != value)
      differences.push_back(
          fmt::format("{}: {} here, {} on rank 0", key, mine.value(key, nlohmann::json()).dump(), value.dump()));
  }
  for (const auto& [key, value] : mine.items()) {
    if (!theirs.contains(key)) differences.push_back(fmt::format("{}: {} here, absent on rank 0", key, value.dump()));
  }
  std::vector<double> differ = {differences.empty() ? 0.0 : 1.0};
  comm.sum(differ);
  if (!differences.empty()) {
    fail("train",
         "{}: its configuration or data differ from rank 0's ({}); every rank must run the same `vit train` "
         "flags on the same data",
         comm.describe(comm.rank()), fmt::join(differences, "; "));
  }
  if (differ[0] > 0)
    fail("train",
         "{} of the {} ranks have a configuration or data that differ from rank 0's (their messages say "
         "what); every rank must run the same `vit train` flags on the same data",
         static_cast<int64_t>(differ[0]), comm.size());
  VIT_CHECK(c.batch_size >= comm.size(), "train",
            "--batch-size {} is the global batch: it needs at least one image "
            "for each of the {} ranks",
            c.batch_size, comm.size());
}

void check_replicas_agree(const Run& run, int64_t epoch) {
  if (!run.comm.distributed()) return;
  io::Xxh64 hash;  // the checkpoints' checksum: several GB/s
  for (const auto& [name, p] : run.params) {
    hash.update(p.data().data<float>(), static_cast<size_t>(p.numel()) * sizeof(float));
  }
  const std::vector<std::string> all = run.comm.all_gather(fmt::format("{:016x}", hash.digest()));
  for (int r = 1; r < run.comm.size(); ++r) {
    VIT_CHECK(all[r] == all[0], "train",
              "after epoch {} the weights of {} differ from rank 0's: the gradient "
              "reduction went wrong; stopping",
              epoch + 1, run.comm.describe(r));
  }
}

void print_overlap(DataParallel& parallel, distributed::Comm& comm) {
  GradientReducer* reducer = parallel.reducer();
  if (!reducer || !comm.distributed() || reducer->steps() <= 0) return;
  // How much of the communication the backward pass hid. Each rank waits after its backward
  // for the sums to finish; the rank that finishes backward last waits only for what the
  // overlap did not hide (the others also wait for it: that part is the ranks' skew). So the
  // least wait over the ranks, against the same sums alone.
  const double mine = reducer->exposed_seconds() / static_cast<double>(reducer->steps());
  const double least = -comm.max(-mine), most = comm.max(mine);
  const double alone = reducer->time_alone();
  std::printf(
      "gradient sums: %.2f MB a step in %d buckets, %.2f ms alone; after backward the ranks waited %.2f-%.2f ms a "
      "step, the last to finish %.2f ms: %.0f%% of the communication hidden\n",
      static_cast<double>(reducer->gradient_bytes()) / 1e6, reducer->num_buckets(), 1e3 * alone, 1e3 * least,
      1e3 * most, 1e3 * least, alone > 0 ? 100 * std::max(0.0, 1 - least / alone) : 0.0);
}

}  // namespace vit::train
