#include "flags/parse_errors.hpp"

#include <iostream>
#include <string>

#include "flags/unknown_arguments.hpp"

namespace thdpack::cli {
namespace {

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

int report_parse_error(CLI::App& app, const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::Success*>(&error) != nullptr ||
      dynamic_cast<const CLI::CallForHelp*>(&error) != nullptr ||
      dynamic_cast<const CLI::CallForAllHelp*>(&error) != nullptr ||
      dynamic_cast<const CLI::CallForVersion*>(&error) != nullptr) {
    return app.exit(error);  // prints help or the version; exit 0
  }
  // Unknown words never reach here (unknown_argument_message catches them first): without a
  // subcommand the word is missing.
  bool any_parsed = false;
  for (const CLI::App* sub : app.get_subcommands({})) any_parsed = any_parsed || sub->parsed();
  std::string message = one_line(error.what());
  if (!any_parsed) message += "; the subcommands are " + subcommand_list(app) + " (thdpack --help)";
  std::cerr << "thdpack: error: " << message << '\n';
  return 2;
}

}  // namespace thdpack::cli
