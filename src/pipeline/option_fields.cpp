// The table of PipelineOptions' fields (option_fields.hpp) and describe(), its text.

#include "thdpack/pipeline/option_fields.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "core/name_lookup.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

using Kind = OptionField::Kind;

std::string number_text(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

int64_t parse_integer(const std::string& name, const std::string& text, int64_t lo, int64_t hi) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  check(error == std::errc() && end == text.data() + text.size() && value >= lo && value <= hi,
        name, " must be a whole number from ", lo, " to ", hi, ", got '", text, "'");
  return value;
}

double parse_number(const std::string& name, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  check(!text.empty() && end == text.c_str() + text.size(), name, " must be a number, got '", text,
        "'");
  return value;
}

template <class T>
OptionField integer(std::string name, std::string cli_flag, std::string doc,
                    T PipelineOptions::*member) {
  return {name,
          Kind::kInteger,
          std::move(doc),
          std::move(cli_flag),
          false,
          [member](const PipelineOptions& o) { return std::to_string(o.*member); },
          [member, name](PipelineOptions& o, const std::string& text) {
            o.*member = static_cast<T>(parse_integer(name, text, std::numeric_limits<T>::min(),
                                                     std::numeric_limits<T>::max()));
          }};
}

OptionField number(std::string name, std::string cli_flag, std::string doc,
                   double PipelineOptions::*member) {
  return {name,
          Kind::kNumber,
          std::move(doc),
          std::move(cli_flag),
          false,
          [member](const PipelineOptions& o) { return number_text(o.*member); },
          [member, name](PipelineOptions& o, const std::string& text) {
            o.*member = parse_number(name, text);
          }};
}

OptionField flag(std::string name, std::string cli_flag, std::string doc,
                 bool PipelineOptions::*member) {
  return {name,
          Kind::kFlag,
          std::move(doc),
          std::move(cli_flag),
          false,
          [member](const PipelineOptions& o) { return std::string(o.*member ? "1" : "0"); },
          [member, name](PipelineOptions& o, const std::string& text) {
            const bool on = text == "1" || text == "true";
            check(on || text == "0" || text == "false", name, " must be 0, 1, true or false, got '",
                  text, "'");
            o.*member = on;
          }};
}

OptionField text(std::string name, std::string cli_flag, std::string doc,
                 std::string PipelineOptions::*member) {
  return {name,
          Kind::kText,
          std::move(doc),
          std::move(cli_flag),
          false,
          [member](const PipelineOptions& o) { return o.*member; },
          [member](PipelineOptions& o, const std::string& value) { o.*member = value; }};
}

/// One of named values; `names` first lists each value's own name, then any aliases.
template <class E>
OptionField choice(std::string name, std::string cli_flag, std::string doc,
                   E PipelineOptions::*member, std::vector<std::pair<E, std::string>> names) {
  return {name,
          Kind::kText,
          std::move(doc),
          std::move(cli_flag),
          false,
          [member, names](const PipelineOptions& o) {
            for (const auto& [value, text] : names) {
              if (value == o.*member) return text;
            }
            fail<InternalError>("an option has a value without a name");
          },
          [member, names, name](PipelineOptions& o, const std::string& value) {
            for (const auto& [v, text] : names) {
              if (text == value) {
                o.*member = v;
                return;
              }
            }
            std::string listed;
            for (size_t i = 0; i < names.size(); ++i) {
              if (i > 0 && names[i].first == names[i - 1].first) continue;  // an alias
              listed += (listed.empty() ? "" : (i + 1 == names.size() ? " or " : ", ")) +
                        ("'" + names[i].second + "'");
            }
            fail(name, " must be ", listed, ", got '", value, "'");
          }};
}

OptionField required(OptionField field) {
  field.required = true;
  return field;
}

OptionField topology_field(std::string name, std::function<std::string(const Topology&)> text) {
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return {name, Kind::kInteger, "set by `topology`",
          flag, false,          [text](const PipelineOptions& o) { return text(o.topology); },
          {}};
}

std::vector<OptionField> make_fields() {
  using O = PipelineOptions;
  auto config = [](auto member) {
    return [member](const Topology& t) { return message(t.config().*member); };
  };
  std::vector<OptionField> f = {
      topology_field("tp", config(&TopologyConfig::tp)),
      topology_field("cp", config(&TopologyConfig::cp)),
      topology_field("dp", config(&TopologyConfig::dp)),
      topology_field("pp", config(&TopologyConfig::pp)),
      topology_field("ep", config(&TopologyConfig::ep)),
      topology_field("vpp", config(&TopologyConfig::vpp)),
      topology_field("vpp_group",
                     [](const Topology& t) { return std::to_string(t.microbatch_multiple()); }),
      topology_field("order", [](const Topology& t) { return t.config().order; }),
      required(integer("max_seqlen_per_dp_cp_rank", "--max-seqlen-per-dp-cp-rank",
                       "M: token budget of one micro-batch on one DP x CP rank",
                       &O::max_seqlen_per_dp_cp_rank)),
      text("scheduler", "--scheduler", "the scheduler (scheduler_names())", &O::scheduler),
      {"cost", Kind::kCost, "per-sample cost: linear,quadratic coefficients", "--cost-linear",
       false,
       [](const O& o) { return number_text(o.cost.linear) + "," + number_text(o.cost.quadratic); },
       [](O& o, const std::string& value) {
         const size_t comma = value.find(',');
         check(comma != std::string::npos, "cost must be 'linear,quadratic', got '", value, "'");
         o.cost = CostModel::from_coefficients(parse_number("cost", value.substr(0, comma)),
                                               parse_number("cost", value.substr(comma + 1)));
       }},
      text("model", "--model", "model preset: the dynamic-CP cost model's", &O::model),
      number("gpu_tflops", "--gpu-tflops", "achieved TFLOP/s per GPU (dynamic CP cost)",
             &O::gpu_tflops),
      number("cp_link_gbps", "--cp-link-gbps", "ring-attention link GB/s (dynamic CP cost)",
             &O::cp_link_gbps),
      number("cp_step_overhead_us", "--cp-step-overhead-us",
             "microseconds per ring step and layer (dynamic CP cost)", &O::cp_step_overhead_us),
      integer("min_cp", "--min-cp", "smallest CP group under dynamic CP", &O::min_cp),
      choice("reading", "--reading", "who reads data", &O::reading,
             {{ReadingMode::kMegatron, "megatron"},
              {ReadingMode::kAllRanks, "all-ranks"},
              {ReadingMode::kAllRanks, "all_ranks"}}),
      flag("sequence_parallel", "--sequence-parallel", "padding divisor times tp",
           &O::sequence_parallel),
      choice("cp_mode", "--cp-mode", "CP slicing", &O::cp_mode,
             {{CpMode::kZigzag, "zigzag"}, {CpMode::kContiguous, "contiguous"}}),
      choice("oversize", "--oversize", "a sample over the cap", &O::oversize,
             {{OversizePolicy::kError, "error"}, {OversizePolicy::kTruncate, "truncate"}}),
      integer("pad_id", "--pad-id", "token of padding positions", &O::pad_id),
      integer("ignore_id", "--ignore-id", "label of positions without a target", &O::ignore_id),
      flag("ignore_masked_labels", "--ignore-masked-labels",
           "labels ignore_id where the loss mask is 0 (masked prompts)", &O::ignore_masked_labels),
      choice("pad_positions", "--pad-positions", "position ids of padding", &O::pad_positions,
             {{PadPositions::kContinue, "continue"}, {PadPositions::kZero, "zero"}}),
      choice("tail_align", "--tail-align", "static shapes: tail alignment of every pack",
             &O::tail_align,
             {{TailAlign::kNone, "none"},
              {TailAlign::kMultiple, "multiple"},
              {TailAlign::kCapacity, "capacity"}}),
      integer("tail_multiple", "--tail-multiple", "N of tail_align multiple", &O::tail_multiple),
      choice("tail_policy", "--tail-policy", "where the tail rows go", &O::tail_policy,
             {{TailPolicy::kAppendDummySeq, "append_dummy_seq"},
              {TailPolicy::kExtendLast, "extend_last"}}),
      integer("fixed_cu_seqlens_entries", "--fixed-cu-seqlens-entries",
              "static shapes: entries of every cu_seqlens array", &O::fixed_cu_seqlens_entries),
      integer("max_sequences_per_pack", "--thd-max-packed-sequences",
              "cap on the samples of one pack (Megatron's thd_max_packed_sequences)",
              &O::max_sequences_per_pack),
      flag("tokens_on_last_stage", "--tokens-on-last-stage",
           "the last stage also gets tokens (multi-token prediction)", &O::tokens_on_last_stage),
  };
  return f;
}

}  // namespace

const std::vector<OptionField>& pipeline_option_fields() {
  static const std::vector<OptionField> fields = make_fields();
  return fields;
}

const OptionField& pipeline_option_field(const std::string& name) {
  for (const OptionField& f : pipeline_option_fields()) {
    if (f.name == name) return f;
  }
  std::vector<std::string> names;
  for (const OptionField& f : pipeline_option_fields()) names.push_back(f.name);
  detail::throw_unknown_name("pipeline option", name, names);
}

std::string PipelineOptions::describe() const {
  std::string out;
  for (const OptionField& f : pipeline_option_fields()) {
    out += (out.empty() ? "" : " ") + f.name + "=" + f.text(*this);
  }
  return out;
}

}  // namespace thdpack
