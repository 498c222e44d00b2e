#pragma once
// How command-line parse errors end: --help and --version print and exit 0; anything else is one
// line on stderr and exit 2 (docs/cli.md), whatever CLI11's own error code.

#include <CLI/CLI.hpp>

namespace thdpack::cli {

/// Exit code 2 for parse errors, printed as one line "thdpack: error: ..." (a mistyped or missing
/// subcommand lists the subcommands that exist); 0 after printing --help or --version.
int report_parse_error(CLI::App& app, const CLI::ParseError& error);

}  // namespace thdpack::cli
