#include "flags/unknown_arguments.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace thdpack::cli {
namespace {

// Megatron-LM's words for what thdpack's flags say differently: a user coming from a Megatron
// launch script types these first.
struct MegatronName {
  std::string_view megatron;
  std::string_view thdpack;
  std::string_view why;  // appended when the meaning differs, not only the name
};
// (Megatron-LM's flags that thdpack takes as they are, such as --tensor-model-parallel-size or
// --global-batch-size, are aliases of the options themselves.)
constexpr MegatronName kMegatronNames[] = {
    {"--data-parallel-size", "--dp",
     " (Megatron-LM derives it from the world size; thdpack plans for the size given)"},
    {"--virtual-pipeline-model-parallel-size", "--vpp", ""},
    {"--micro-batch-size", "--max-seqlen-per-dp-cp-rank",
     " (a packed micro-batch is bounded by tokens per rank, not by a sample count)"},
};

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool is_negative_number(const std::string& word) {
  return word.size() > 1 && word[0] == '-' &&
         (std::isdigit(static_cast<unsigned char>(word[1])) != 0 || word[1] == '.');
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  if (app.get_version_ptr() != nullptr) names.emplace_back("--version");
  return names;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// The hint for an unknown option of `command` (the subcommand, or "" at the top level).
std::string option_hint(const std::string& flag, const std::vector<std::string>& known,
                        const std::string& command) {
  const std::string help = "(thdpack" + (command.empty() ? "" : " " + command) + " --help)";
  for (const MegatronName& name : kMegatronNames) {
    if (flag == name.megatron &&
        std::find(known.begin(), known.end(), name.thdpack) != known.end()) {
      return "; Megatron-LM's " + std::string(name.megatron) + " is thdpack's " +
             std::string(name.thdpack) + std::string(name.why) + " " + help;
    }
  }
  const std::string near = nearest_word(flag, known);
  return (near.empty() ? "" : "; did you mean '" + near + "'?") + " " + help;
}

}  // namespace

std::string subcommand_list(const CLI::App& app) {
  std::string out;
  for (const std::string& name : subcommand_names(app)) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& candidate : candidates) {
    const size_t d = edit_distance(word, candidate);
    if (best.empty() || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  const size_t allowed = std::max<size_t>(2, word.size() / 3);
  return !best.empty() && best_distance <= allowed ? best : std::string();
}

std::string unknown_argument_message(CLI::App& app, int argc, char** argv) {
  CLI::App* command = nullptr;
  std::vector<std::string> known = option_names(app);
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.empty() || word[0] != '-') {
      if (command != nullptr) continue;  // an argument the subcommand takes
      const std::vector<std::string> commands = subcommand_names(app);
      if (std::find(commands.begin(), commands.end(), word) == commands.end()) {
        const std::string near = nearest_word(word, commands);
        return "unknown subcommand '" + word + "'" +
               (near.empty() ? "." : "; did you mean '" + near + "'?") + " The subcommands are " +
               subcommand_list(app) + " (thdpack --help)";
      }
      command = app.get_subcommand(word);
      known = option_names(*command);
      continue;
    }
    if (word == "-" || is_negative_number(word)) continue;  // stdin/stdout, or a value
    const size_t equals = word.find('=');
    const std::string flag = word.substr(0, equals);
    // -C8192: a short option with its value attached.
    const bool attached_short = flag.size() > 2 && flag[1] != '-';
    const std::string name = attached_short ? flag.substr(0, 2) : flag;
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      const std::string where = command != nullptr ? command->get_name() : std::string();
      return (where.empty() ? "" : where + ": ") + "unknown option '" + flag + "'" +
             option_hint(flag, known, where);
    }
    // The next word is this option's value ("-inf", "-x" or anything else), not an option.
    const CLI::Option* option = (command != nullptr ? command : &app)->get_option_no_throw(name);
    if (option != nullptr && option->get_type_size() > 0 && equals == std::string::npos &&
        !attached_short) {
      ++i;
    }
  }
  return {};
}

}  // namespace thdpack::cli
