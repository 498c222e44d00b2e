#pragma once
// Subcommands of the thdpack CLI. Each registers itself and its flags on the app and returns the
// action to run when it is selected (the action returns the exit code).

#include <CLI/CLI.hpp>
#include <functional>

namespace thdpack::cli {

struct Command {
  CLI::App* parser = nullptr;
  std::function<int()> action;
};

Command add_plan_command(CLI::App& app);
Command add_list_command(CLI::App& app);
Command add_pack_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
#ifdef THDPACK_HAVE_MPI
Command add_run_command(CLI::App& app);
Command add_reorder_command(CLI::App& app);
#endif

}  // namespace thdpack::cli
