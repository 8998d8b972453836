// The `vit` command: parses the subcommand and its flags (CLI11) into config structs and hands
// them to the library. Every error ends as one "error: ..." line and a non-zero exit.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "core/check.h"
#include "core/system.h"
#include "distributed/comm.h"
#include "train/trainer.h"

namespace {

int run_command(int argc, char** argv) {
  // Exceeding a file-size limit (ulimit -f) makes write() fail with EFBIG, reported like a full
  // disk, instead of killing the process mid-save.
  std::signal(SIGXFSZ, SIG_IGN);
  vit::keep_freed_memory();  // tensors freed each step are reused, not faulted in again
  CLI::App app{"vit: Vision Transformers in C++ (train, evaluate, run)", "vit"};
  app.set_version_flag("--version", std::string("vit ") + VIT_VERSION);
  app.require_subcommand(1);
  vit::cli::add_train_command(app);
  vit::cli::add_eval_command(app);
  vit::cli::add_predict_command(app);
  vit::cli::add_embed_command(app);
  vit::cli::add_info_command(app);
  vit::cli::add_attention_command(app);
  vit::cli::add_bench_command(app);
  vit::cli::add_quantize_command(app);
  vit::cli::add_export_command(app);
  vit::cli::add_convert_command(app);
  vit::cli::add_serve_command(app);
  vit::cli::add_shard_command(app);
  vit::cli::add_demo_command(app);
  // CLI11 answers an unknown word with "A subcommand is required": name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->check_name(argv[1]);
    }
    if (!found) {
      std::fprintf(stderr, "error: unknown command '%s' (commands: %s; vit --help says more)\n", argv[1],
                   known.c_str());
      return 2;
    }
  }
  // Under mpirun with several ranks only the commands that work as one job may run: the others
  // would each do the same work N times over and print it N times.
  if (const int ranks = vit::distributed::Comm::launched_ranks(); ranks > 1 && argc > 1) {
    const std::string command = argv[1];
    bool allreduce = false;
    for (int i = 2; i < argc; ++i) allreduce = allreduce || std::string(argv[i]) == "--allreduce";
    if (command != "train" && !(command == "bench" && allreduce) && command.rfind("-", 0) != 0) {
      if (vit::distributed::Comm::launched_rank() == 0) {
        std::fprintf(stderr,
                     "error: `vit %s` does not run as an MPI job of %d ranks: run it without mpirun (under mpirun: "
                     "`vit train`, and `vit bench --allreduce`)\n",
                     command.c_str(), ranks);
      }
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const vit::Interrupted& e) {
    // Under mpirun every rank stops at the same step; rank 0 says so for all of them.
    if (!vit::distributed::Comm::launched_by_mpirun() || vit::distributed::Comm::world().rank() == 0)
      std::fprintf(stderr, "%s; continue with: vit train --resume %s\n", e.what(), e.run_dir().c_str());
    return 128 + e.signal();  // the shell's convention: 130 after SIGINT, 143 after SIGTERM
  } catch (const vit::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int code = run_command(argc, argv);
  // Under mpirun, MPI is finalised when the ranks end together (done, or stopped by a signal
  // after saving). After an error or a lost rank it is not: finalising waits for every rank, and
  // mpirun, seeing this exit, ends the others.
  if (vit::distributed::Comm::launched_by_mpirun() && (code == 0 || code == 130 || code == 143)) {
    std::fflush(stdout);
    vit::distributed::Comm::world().finalize();
  }
  return code;
}
