#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// What every rank of a group must hold alike (options, shapes, schema digests), compared one way:
// a rank whose values differ from rank 0's makes every rank throw the same InvalidArgument, naming
// the value, rank 0's and that rank's. A rank with other options would read other samples or enter
// other collectives and hang, so the ranks check before they diverge.
//
// The values may travel in a collective of their own (require_agreement over a Communicator: one
// allgather) or ride in one the caller makes anyway (require_agreement over gathered values).

#include <string>
#include <vector>

#include "thdpack/comm/communicator.hpp"

namespace thdpack {

/// A value the ranks must agree on: what it is ("--global-batch", "the hidden size") and its text.
struct AgreedValue {
  std::string name;
  std::string value;
  bool operator==(const AgreedValue&) const = default;
};

/// `all[r]`: rank r's values, in rank order and in the same order on every rank. Throws
/// InvalidArgument "<who>ranks disagree on NAME: rank 0 has 'A', rank R has 'B'<hint>" for the
/// first rank R and value that differ from rank 0's (a value a rank lacks reads '(none)'); values
/// over 80 bytes are cut, ending in "…".
void require_agreement(const std::vector<std::vector<AgreedValue>>& all, const std::string& who,
                       const std::string& hint = "");

/// Collective over `comm` (one allgather of text, whatever the values): gathers every rank's `mine`
/// and checks them as above, so that every rank throws alike or none does.
void require_agreement(Communicator& comm, const std::vector<AgreedValue>& mine,
                       const std::string& who, const std::string& hint = "");

}  // namespace thdpack
