// thdpack: packed-sequence (THD) planning, packing and distribution for LLM training.

#include <CLI/CLI.hpp>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "commands.hpp"
#include "flags/parse_errors.hpp"
#include "flags/unknown_arguments.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/version.hpp"
#include "thdpack/data/arrow_dataset.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/data/parquet_dataset.hpp"

int main(int argc, char** argv) {
  // An interrupted run leaves no temporary file of its outputs; past a file size limit a write
  // fails with a message.
  thdpack::clean_up_outputs_on_signals();
  // Pack files whose source is Parquet reopen it (a no-op in a build without Parquet support).
  thdpack::register_parquet_pack_source();
  thdpack::register_arrow_pack_source();
  CLI::App app{"thdpack: packed-sequence (THD) data layer for distributed LLM training"};
  app.set_version_flag("--version", std::string("thdpack ") + thdpack::kVersion);
  app.require_subcommand(1);
  const std::vector<thdpack::cli::Command> commands = {
      thdpack::cli::add_plan_command(app),
#ifdef THDPACK_HAVE_MPI
      thdpack::cli::add_run_command(app),  thdpack::cli::add_reorder_command(app),
#endif
      thdpack::cli::add_pack_command(app), thdpack::cli::add_convert_command(app),
      thdpack::cli::add_list_command(app),
  };

  // `thdpack help [COMMAND]` is `thdpack [COMMAND] --help`.
  std::vector<char*> args(argv, argv + argc);
  std::string help_flag = "--help";
  if (argc >= 2 && std::string(argv[1]) == "help") {
    args.erase(args.begin() + 1);
    args.push_back(help_flag.data());
  }
  const int count = static_cast<int>(args.size());
  const std::string unknown = thdpack::cli::unknown_argument_message(app, count, args.data());
  if (!unknown.empty()) {
    std::cerr << "thdpack: error: " << unknown << '\n';
    return 2;
  }
  try {
    app.parse(count, args.data());
  } catch (const CLI::ParseError& e) {
    return thdpack::cli::report_parse_error(app, e);
  }
  try {
    for (const auto& command : commands) {
      if (command.parser->parsed()) return command.action();
    }
  } catch (const thdpack::InvalidArgument& e) {
    std::cerr << "thdpack: error: " << e.what() << '\n';
    return 2;
  } catch (const thdpack::Error& e) {
    std::cerr << "thdpack: " << e.what() << '\n';
    return 3;
  } catch (const std::bad_alloc&) {
    std::cerr << "thdpack: error: out of memory (this machine's memory, ulimit -v or the cgroup's "
                 "limit); give the command less data (--limit, --global-batch, --steps) or more "
                 "memory\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "thdpack: unexpected error: " << e.what() << '\n';
    return 4;
  }
  return 1;
}
