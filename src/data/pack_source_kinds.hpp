#pragma once
// The pack-source kinds registered from outside the core library (register_pack_source_kind).

#include <string>

#include "thdpack/data/pack_file.hpp"

namespace thdpack::detail {

/// The opener registered for `kind`; InvalidArgument "unknown pack source kind" when none is (for
/// "parquet", saying that this build lacks Parquet support and how to enable it).
PackSourceOpener registered_pack_source_opener(const std::string& kind);

}  // namespace thdpack::detail
