// Names of the static-shape options, shared by the CLI, the bindings and option descriptions.

#include "thdpack/core/errors.hpp"
#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {

std::string tail_align_name(TailAlign align) {
  switch (align) {
    case TailAlign::kMultiple:
      return "multiple";
    case TailAlign::kCapacity:
      return "capacity";
    case TailAlign::kNone:
      break;
  }
  return "none";
}

TailAlign parse_tail_align(const std::string& name) {
  if (name == "none") return TailAlign::kNone;
  if (name == "multiple") return TailAlign::kMultiple;
  if (name == "capacity") return TailAlign::kCapacity;
  fail("tail_align must be 'none', 'multiple' or 'capacity', got '", name, "'");
}

std::string tail_policy_name(TailPolicy policy) {
  return policy == TailPolicy::kExtendLast ? "extend_last" : "append_dummy_seq";
}

TailPolicy parse_tail_policy(const std::string& name) {
  if (name == "append_dummy_seq") return TailPolicy::kAppendDummySeq;
  if (name == "extend_last") return TailPolicy::kExtendLast;
  fail("tail_policy must be 'append_dummy_seq' or 'extend_last', got '", name, "'");
}

}  // namespace thdpack
