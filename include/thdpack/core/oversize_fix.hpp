#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// What an error about a sample over the cap tells the user to do, in the words of every front end:
// the message reaches Python callers and CLI users alike.

namespace thdpack {

inline constexpr const char* kOversizeFix =
    "raise max_seqlen_per_dp_cp_rank (-M) or truncate (oversize=\"truncate\", --oversize truncate)";

}  // namespace thdpack
