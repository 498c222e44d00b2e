#pragma once
// The common path of a JSONL line: parsed event by event (nlohmann's SAX interface) straight into
// a Sample, with no JSON document in between. A document allocates when it is destroyed (nlohmann
// flattens nested values onto a heap stack in its noexcept destructor), so running out of memory
// while one was alive ended the process in std::terminate instead of a message; and building it
// costs time. A line whose shape is anything but a valid sample gets nullopt, and the document
// reader of jsonl_dataset.cpp (which writes the messages) reads it again.

#include <optional>
#include <string_view>

#include "thdpack/core/dataset.hpp"
#include "thdpack/data/jsonl_dataset.hpp"

namespace thdpack::detail {

/// `line` (no UTF-8 BOM, no NUL byte, nesting checked) as a sample with id `id` when it is a
/// valid one under `options`; nullopt otherwise, and for the rarer shapes left to the document
/// reader (objects nested in an ignored key's value).
std::optional<Sample> parse_sample_events(std::string_view line, int64_t id,
                                          const JsonlOptions& options);

}  // namespace thdpack::detail
