// One function per subcommand: each registers its flags and its callback on the app.
#pragma once

#include <CLI/CLI.hpp>

namespace vit::cli {

void add_demo_command(CLI::App& app);

}  // namespace vit::cli
