// One function per subcommand: each registers its flags and its callback on the app.
#pragma once

#include <CLI/CLI.hpp>

namespace vit::cli {

void add_demo_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_embed_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_attention_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_shard_command(CLI::App& app);
// Applies --threads (0 = all cores) to OpenMP and BLAS.
void set_threads(int threads);

}  // namespace vit::cli
