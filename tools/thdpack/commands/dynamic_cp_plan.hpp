#pragma once
// `thdpack plan --scheduler default_dynamic_cp | balanced_dynamic_cp`: fixed CP and dynamic CP side
// by side under the CP cost model (docs/schedulers.md), over the same global batches.

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>

#include "flags/job_flags.hpp"
#include "reports/plan_report.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/schedule/cost_model.hpp"

namespace thdpack::cli {

// Largest --gpu-tflops taken (plan and run): far beyond any GPU, small enough that times stay
// meaningful.
inline constexpr double kMaxGpuTflops = 1e6;

struct DynamicCpFlags {
  double link_gbps = kDefaultCpLinkGBps;
  double step_overhead_us = kDefaultCpStepOverheadUs;
  int min_cp = 1;

  void add_to(CLI::App& command);
};

/// What every `plan` run records of its job (plan file head, report, JSON): with a fixed-CP
/// layout; a dynamic-CP run then sets its own capacity, min_cp, divisor and cost.
PlanRunInfo plan_run_info(const Job& job, int64_t steps, double gpu_tflops);

/// True for the names of dynamic-CP schedulers.
bool is_dynamic_cp_scheduler(const std::string& name);

/// Where `plan` writes the plans and the report ("" for none); the caller has checked the paths.
struct DynamicCpOutputs {
  std::string plan_out;  ///< plan_file_writer.hpp
  std::string report;    ///< dynamic_cp_html_report.hpp
  int64_t report_step = 0;
};

/// Plans `steps` global batches with dp_balanced and balanced at the layout's fixed cp and with
/// every dynamic-CP scheduler over all dp·cp ranks; prints a table (or JSON) of micro-batches, CP
/// groups and modeled step time against each layout's lower bound, and writes the outputs asked
/// for, moved into place together through `files` (its commit_all() is called once all are
/// complete). Returns 2 when the scheduler `name` failed, else 0.
int run_dynamic_cp_plan(const Job& job, const std::string& name, int64_t steps, double gpu_tflops,
                        const DynamicCpFlags& flags, const DynamicCpOutputs& outputs, bool json,
                        std::ostream& out, DeferredCommits& files);

}  // namespace thdpack::cli
