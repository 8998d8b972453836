// `vit bench`: latency / throughput / GFLOP/s / peak memory of a preset (model flags override
// its values), inference or training; with --gemms, each GEMM of the forward against the measured
// arithmetic peaks (perf/gemm_benchmark.h); with --convs, a hybrid's convolutions (perf/conv_benchmark.h).
#include <omp.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "cli/validators.h"
#include "kernels/cpu_features.h"
#include "perf/allreduce_benchmark.h"
#include "perf/loader_benchmark.h"
#include "perf/model_benchmark.h"

namespace vit::cli {

void add_bench_command(CLI::App& app) {
  struct Options {
    std::string preset = "vit_base_patch16_224";
    perf::BenchmarkConfig config;
    int threads = 0;
    bool json = false;
    bool allreduce = false;
    std::string isa;
    std::string data;
    double rrc_scale = 0.08;
    int64_t loader_threads = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("bench", "time inference (or a training step with --train) of a preset");
  CLI::Option* preset = cmd->add_option("--preset", o->preset, "model preset")->capture_default_str();
  auto model_flags = std::make_shared<ModelFlags>(*cmd);
  CLI::Option* checkpoint =
      cmd->add_option("--checkpoint", o->config.checkpoint,
                      "load this model (vit, timm, torchvision or Hugging Face safetensors) instead of a preset; the "
                      "load is timed");
  model_flags->exclude(checkpoint);
  cmd->add_option("--batch", o->config.batch, "batch size")->capture_default_str()->check(kPositive);
  cmd->add_option("--iters", o->config.iters, "measured iterations")->capture_default_str()->check(kPositive);
  cmd->add_option("--warmup", o->config.warmup, "warm-up iterations")->capture_default_str()->check(kNonNegative);
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(kThreads);
  cmd->add_flag("--train", o->config.train, "time a full training step (forward, loss, backward, AdamW)");
  cmd->add_option("--precision", o->config.precision,
                  "arithmetic of the Linear layers: fp32, or bf16 (bfloat16 inputs, float32 accumulation; with --train "
                  "mixed precision as vit train --precision bf16)")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  cmd->add_flag("--graph", o->config.graph,
                "inference through the autograd graph (the training code path) instead of the fused inference path");
  cmd->add_option("--isa", o->isa,
                  "cap the kernels' instruction set: scalar, avx2, avx512 or avx512-vnni (default: the CPU's best; "
                  "the VIT_ISA environment variable does the same for any command)");
  cmd->add_flag("--gemms", o->config.gemms,
                "then time each GEMM of the forward alone (M, K, N, epilogue, GFLOP/s, share of the measured peak "
                "of its kernel's instructions x threads) and print those peaks and the GEMMs' share of the median");
  cmd->add_flag("--convs", o->config.convs,
                "a hybrid: then time each convolution of the backbone alone (forward, input and weight gradients, "
                "share of the measured float32 FMA peak x threads) and print the model's share of that peak");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_flag("--allreduce", o->allreduce,
                "under mpirun: time the sum over the ranks (the gradient allreduce) of 64 KB to 64 MB, with the bus "
                "bandwidth achieved");
  cmd->add_option("--data", o->data,
                  "time the input pipeline alone on this dataset's training split (an image folder or shards): "
                  "decode, random resized crop, flip and normalise at the model's size by the loader threads, no "
                  "model; images/s (--batch: 64 unless given)");
  cmd->add_option("--rrc-scale", o->rrc_scale, "with --data: the random resized crop's smallest area (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--loader-threads", o->loader_threads, data::kLoaderThreadsHelp)
      ->check(CLI::Range(int64_t{0}, data::kMaxLoaderThreads));
  CLI::Option* batch_given = cmd->get_option("--batch");
  cmd->callback([o, preset, model_flags, batch_given] {
    set_threads(o->threads);
    if (!o->data.empty()) {
      data::set_loader_threads(o->loader_threads);
      const model::ViTConfig m = model_flags->config(o->preset, preset->count() > 0);
      perf::LoaderBenchmarkConfig c{.data_dir = o->data,
                                    .channels = m.in_channels,
                                    .size = m.image_size,
                                    .batch = batch_given->count() > 0 ? o->config.batch : 64,
                                    .batches = o->config.iters,
                                    .warmup = o->config.warmup};
      c.augment.hflip = true;
      c.augment.rrc_scale = o->rrc_scale;
      const perf::LoaderBenchmarkResult r = perf::time_loader(c);
      std::printf("loader: %s at %ldx%ldx%ld (random resized crop %g-1, flip), batch %ld, %d loader threads\n",
                  r.source.c_str(), c.channels, c.size, c.size, c.augment.rrc_scale, c.batch, r.loader_threads);
      std::printf("  %.1f images/s (%ld images in %.2f s after %ld warm-up batches)\n", r.images_per_s, r.images,
                  r.seconds, c.warmup);
      return;
    }
    if (!o->isa.empty()) kernels::set_isa_limit(kernels::parse_isa(o->isa, "--isa"));
    if (o->allreduce) {
      distributed::Comm& comm = distributed::Comm::world();
      VIT_CHECK(comm.distributed(), "bench",
                "--allreduce times the sum over the ranks of an MPI job: run it as mpirun -np N vit bench --allreduce "
                "(N >= 2)");
      const std::vector<int64_t> sizes = {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
      const auto timings = perf::time_allreduce(comm, sizes, static_cast<int>(o->config.iters));
      if (comm.rank() != 0) return;
      std::printf("allreduce (float32 sum) over %d ranks, median of %ld iterations:\n", comm.size(), o->config.iters);
      for (const auto& t : timings) {
        std::printf("  %8.2f MB  %9.3f ms  bus bandwidth %6.2f GB/s (%.1f Gb/s)\n", static_cast<double>(t.bytes) / 1e6,
                    t.median_ms, t.bus_gb_per_s, 8 * t.bus_gb_per_s);
      }
      return;
    }
    if (o->config.checkpoint.empty()) o->config.model = model_flags->config(o->preset, preset->count() > 0);
    const perf::BenchmarkResult r = perf::run_benchmark(o->config);
    const int threads = omp_get_max_threads();
    if (o->json) {
      std::printf("%s\n", r.to_json(o->config, threads).c_str());
      return;
    }
    std::printf("%s %s (%s), batch %ld, %d threads, %ld iterations after %ld warm-up\n",
                o->config.checkpoint.empty() ? o->config.model.name.c_str() : o->config.checkpoint.c_str(),
                o->config.train ? "training step" : "inference", r.precision.c_str(), o->config.batch, threads,
                o->config.iters, o->config.warmup);
    std::printf("  median %.2f ms, p90 %.2f ms, %.1f images/s, %.1f GFLOP/s, peak RSS %.1f MiB\n", r.median_ms,
                r.p90_ms, r.images_per_s, r.gflops, r.peak_rss_mb);
    std::printf("%s", r.peak_text(threads).c_str());
    std::printf("  kernels: %s\n", kernels::kernels_summary().c_str());
    if (r.load_ms >= 0) std::printf("  loaded in %.1f ms\n", r.load_ms);
    if (r.pack_ms >= 0) std::printf("  weights packed in %.1f ms\n", r.pack_ms);
    if (r.gemms) std::printf("%s", r.gemms->to_text(r.median_ms, r.fastest_ms()).c_str());
    if (r.convs) std::printf("%s", r.convs->to_text(r.median_ms, r.gflops, o->config.train).c_str());
  });
}

}  // namespace vit::cli
