#include "flags/parse_errors.hpp"

#include <iostream>
#include <string>

namespace thdpack::cli {
namespace {

std::string subcommand_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

// The first argument that is not an option of the top level, when no subcommand was parsed.
std::string first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] != '-') return arg;
  }
  return {};
}

// CLI11's message on one line: its own line breaks become "; ".
std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string out;
  for (char c : text) {
    if (c == '\n') {
      out += "; ";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

int report_parse_error(CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  if (dynamic_cast<const CLI::Success*>(&error) != nullptr ||
      dynamic_cast<const CLI::CallForHelp*>(&error) != nullptr ||
      dynamic_cast<const CLI::CallForAllHelp*>(&error) != nullptr ||
      dynamic_cast<const CLI::CallForVersion*>(&error) != nullptr) {
    return app.exit(error);  // prints help or the version; exit 0
  }
  bool any_parsed = false;
  for (const CLI::App* sub : app.get_subcommands({})) any_parsed = any_parsed || sub->parsed();
  std::string message = one_line(error.what());
  if (!any_parsed) {
    const std::string word = first_word(argc, argv);
    message = (word.empty() ? message : "unknown subcommand '" + word + "'") +
              "; the subcommands are " + subcommand_names(app) + " (thdpack --help)";
  }
  std::cerr << "thdpack: error: " << message << '\n';
  return 2;
}

}  // namespace thdpack::cli
