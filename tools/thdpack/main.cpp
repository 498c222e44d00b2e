// thdpack: packed-sequence (THD) planning, packing and distribution for LLM training.

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "flags/parse_errors.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/version.hpp"

int main(int argc, char** argv) {
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return thdpack::cli::report_parse_error(app, e, argc, argv);
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
  } catch (const std::exception& e) {
    std::cerr << "thdpack: unexpected error: " << e.what() << '\n';
    return 4;
  }
  return 1;
}
