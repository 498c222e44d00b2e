#pragma once
// Mistyped words on the command line, found before CLI11 parses it: CLI11 alone reports a typo
// late and in its own words ("--capacity is required" for `--capcity 8192`, "A subcommand is
// required" for `--verison`). Each check names the unknown word first, suggests the nearest valid
// one (or thdpack's name for a Megatron-LM flag) and points at --help.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace thdpack::cli {

/// The one-line error for the first word of argv that names no subcommand of `app` or no option
/// of the subcommand it runs ("" when every word is known). Words after a bare "--", values of
/// options and negative numbers are not checked.
std::string unknown_argument_message(CLI::App& app, int argc, char** argv);

/// The subcommands of `app`, "plan, run, ...", for messages.
std::string subcommand_list(const CLI::App& app);

/// The nearest of `candidates` to `word` by edit distance, when near enough to be a typo of it
/// (at most 2 edits, or a third of the word); "" otherwise.
std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace thdpack::cli
