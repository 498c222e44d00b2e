#include "thdpack/comm/agreement.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/excerpt.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

// A value as quoted in a message: long ones (inline mock configs, option lists) are cut.
std::string quoted(const std::string& value) {
  std::string out = "'";
  out += detail::excerpt(value);
  out += '\'';
  return out;
}

// "<size>:<text>" per name and value: any bytes survive the trip.
std::string encode(const std::vector<AgreedValue>& values) {
  std::string out;
  for (const auto& [name, value] : values) {
    for (const std::string* text : {&name, &value}) {
      out += std::to_string(text->size()) + ":" + *text;
    }
  }
  return out;
}

std::vector<AgreedValue> decode(const std::string& text) {
  std::vector<AgreedValue> out;
  size_t at = 0;
  const auto next = [&] {
    const size_t colon = text.find(':', at);
    check<InternalError>(colon != std::string::npos, "agreement: malformed text");
    const size_t size = std::strtoull(text.c_str() + at, nullptr, 10);
    check<InternalError>(colon + 1 + size <= text.size(), "agreement: truncated text");
    std::string part = text.substr(colon + 1, size);
    at = colon + 1 + size;
    return part;
  };
  while (at < text.size()) {
    std::string name = next();
    out.push_back({std::move(name), next()});
  }
  return out;
}

}  // namespace

void require_agreement(const std::vector<std::vector<AgreedValue>>& all, const std::string& who,
                       const std::string& hint) {
  if (all.empty()) return;
  const std::vector<AgreedValue>& reference = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const std::vector<AgreedValue>& theirs = all[r];
    for (size_t i = 0; i < std::max(theirs.size(), reference.size()); ++i) {
      const AgreedValue none{"", "(none)"};
      const AgreedValue& a = i < reference.size() ? reference[i] : none;
      const AgreedValue& b = i < theirs.size() ? theirs[i] : none;
      if (a == b) continue;
      fail(who, "ranks disagree on ", a.name.empty() ? b.name : a.name, ": rank 0 has ",
           quoted(a.value), ", rank ", r, " has ", quoted(b.value), hint);
    }
  }
}

void require_agreement(Communicator& comm, const std::vector<AgreedValue>& mine,
                       const std::string& who, const std::string& hint) {
  std::vector<std::vector<AgreedValue>> all;
  for (const std::string& text : allgather_strings(comm, encode(mine))) all.push_back(decode(text));
  require_agreement(all, who, hint);
}

}  // namespace thdpack
