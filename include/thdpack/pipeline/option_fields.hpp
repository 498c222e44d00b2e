#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// The fields of PipelineOptions, each declared once: its name, its kind, what it means, how it is
// written as text and read back. describe() is the table's text; Python's PipelineOptions(...)
// takes exactly the table's names as keywords; tests check that ThdPacker, the .pyi stub and the
// CLI's flags (--name-with-dashes, or the Megatron name the table gives) reach every field.

#include <functional>
#include <string>
#include <vector>

#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack {

struct OptionField {
  enum class Kind { kInteger, kNumber, kFlag, kText, kCost };
  std::string name;  ///< the Python keyword and describe()'s key
  Kind kind = Kind::kText;
  std::string doc;        ///< one line
  std::string cli_flag;   ///< the `thdpack run` flag that sets it
  bool required = false;  ///< no usable default: every front end asks for it
  /// The field of `options` as text: integers in decimal, numbers to 17 significant digits, flags
  /// 0 or 1, texts as they are, the cost as "linear,quadratic".
  std::function<std::string(const PipelineOptions&)> text;
  /// Sets the field from text as `text` writes it (flags also true/false). Throws InvalidArgument
  /// naming the field when the text is not of its kind or not one of its values. Empty for the
  /// topology's fields, which `topology` sets.
  std::function<void(PipelineOptions&, const std::string&)> set;
};

/// Every field, in describe() order: the topology's (tp, cp, dp, pp, ep, vpp, vpp_group, order;
/// read-only here), then every option of PipelineOptions.
const std::vector<OptionField>& pipeline_option_fields();

/// The field called `name`; throws InvalidArgument listing the names when there is none.
const OptionField& pipeline_option_field(const std::string& name);

}  // namespace thdpack
