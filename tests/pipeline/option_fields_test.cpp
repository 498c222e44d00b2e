// The options table: every field of PipelineOptions declared once, describe() its text, each
// settable field reads back what it wrote and refuses text of another kind, naming itself.

#include "thdpack/pipeline/option_fields.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "expect_throw.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack {
namespace {

TEST(OptionFields, DescribeIsTheTablesTextAndNamesAreUnique) {
  PipelineOptions o;
  o.topology = Topology({.tp = 2, .cp = 2, .dp = 2});
  o.max_seqlen_per_dp_cp_rank = 4096;
  std::string expected;
  std::set<std::string> names;
  for (const OptionField& f : pipeline_option_fields()) {
    expected += (expected.empty() ? "" : " ") + f.name + "=" + f.text(o);
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_EQ(f.cli_flag.rfind("--", 0), 0U) << f.name;
  }
  EXPECT_EQ(o.describe(), expected);
  EXPECT_NE(o.describe().find("tp=2 cp=2 dp=2"), std::string::npos);
}

TEST(OptionFields, EverySettableFieldReadsBackAndRefusesOtherKinds) {
  const PipelineOptions defaults;
  const std::map<OptionField::Kind, std::string> changed = {{OptionField::Kind::kInteger, "7"},
                                                            {OptionField::Kind::kNumber, "12.5"},
                                                            {OptionField::Kind::kFlag, "1"},
                                                            {OptionField::Kind::kCost, "2,0.5"}};
  const std::map<std::string, std::string> texts = {
      {"scheduler", "local"},     {"model", "llama3-8b"},        {"reading", "all-ranks"},
      {"cp_mode", "contiguous"},  {"oversize", "truncate"},      {"pad_positions", "zero"},
      {"tail_align", "capacity"}, {"tail_policy", "extend_last"}};
  int settable = 0;
  for (const OptionField& f : pipeline_option_fields()) {
    if (!f.set) continue;
    ++settable;
    SCOPED_TRACE(f.name);
    PipelineOptions o;
    const std::string value =
        f.kind == OptionField::Kind::kText ? texts.at(f.name) : changed.at(f.kind);
    f.set(o, value);
    EXPECT_EQ(f.text(o), value);
    EXPECT_NE(o.describe(), defaults.describe());
    f.set(o, f.text(defaults));
    EXPECT_EQ(o.describe(), defaults.describe());
    if (f.kind != OptionField::Kind::kText || f.name == "reading" || f.name == "cp_mode") {
      test_util::expect_throw_with<InvalidArgument>([&] { f.set(o, "not-a-value"); }, {f.name});
    }
  }
  EXPECT_EQ(settable, static_cast<int>(pipeline_option_fields().size()) - 8);  // but the topology's
  test_util::expect_throw_with<InvalidArgument>([] { pipeline_option_field("pad_idd"); },
                                                {"pad_id", "ignore_id"});
}

}  // namespace
}  // namespace thdpack
