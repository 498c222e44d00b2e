// Dynamic context parallelism: plans whose micro-batches split the dp*cp ranks into CP groups of
// their own size.

#include "bindings.hpp"
#include "strict_values.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"
#include "thdpack/schedule/flops.hpp"

namespace thdpack::python {

py::list plan_groups_to_python(const Plan& plan) {
  py::list out;
  for (int64_t k = 0; k < plan.num_microbatches(); ++k) {
    py::list groups;
    for (const CpGroupView g : plan.microbatch(k)) {
      groups.append(
          py::make_tuple(g.first_rank, g.size, std::vector<int64_t>(g.ids.begin(), g.ids.end())));
    }
    out.append(groups);
  }
  return out;
}

void bind_dynamic_cp(py::module_& m) {
  m.def("dynamic_cp_scheduler_names", [] { return scheduler_names(CpLayout::kDynamic); });
  m.def(
      "schedule_dynamic_cp",
      [](const py::object& padded_lengths, int dp, int cp, int64_t max_seqlen,
         const std::string& name, int multiple, int min_cp, const py::object& ids,
         const py::object& model, double gpu_tflops, double cp_link_gbps,
         double cp_step_overhead_us) {
        const std::vector<int64_t> lengths = int64_values(padded_lengths, "padded_lengths");
        std::vector<int64_t> id_values;
        if (ids.is_none()) {
          for (size_t i = 0; i < lengths.size(); ++i) id_values.push_back(static_cast<int64_t>(i));
        } else {
          id_values = int64_values(ids, "ids");
        }
        ScheduleOptions o;
        o.cost = CostModel::megatron_workload();
        o.dp = dp;
        o.cp = cp;
        o.max_seqlen_per_dp_cp_rank = max_seqlen;
        o.microbatch_multiple = multiple;
        o.min_cp = min_cp;
        if (!model.is_none()) {
          o.cost = CostModel::from_model(model_preset(model.cast<std::string>()), gpu_tflops, 2,
                                         cp_link_gbps, cp_step_overhead_us);
        }
        const auto scheduler = make_scheduler(name);
        if (scheduler->layout() != CpLayout::kDynamic) {
          fail(
              "schedule_dynamic_cp plans with a dynamic-CP scheduler (default_dynamic_cp, "
              "balanced_dynamic_cp), not '",
              name, "'; schedule() takes every scheduler");
        }
        Plan plan;
        {
          py::gil_scoped_release release;
          plan = scheduler->schedule({id_values, lengths, {}, {}}, o);
          check_dynamic_cp_plan(plan, id_values, lengths, o);
        }
        return plan_groups_to_python(plan);
      },
      py::arg("padded_lengths"), py::kw_only(), py::arg("dp"), py::arg("cp"),
      py::arg("max_seqlen_per_dp_cp_rank"), py::arg("scheduler") = "default_dynamic_cp",
      py::arg("microbatch_multiple") = 1, py::arg("min_cp") = 1, py::arg("ids") = py::none(),
      py::arg("model") = py::none(), py::arg("gpu_tflops") = kDefaultGpuTflops,
      py::arg("cp_link_gbps") = kDefaultCpLinkGBps,
      py::arg("cp_step_overhead_us") = kDefaultCpStepOverheadUs,
      "Plans one global batch with dynamic CP (no communication): plan[k] lists micro-batch k's "
      "CP groups as (first_rank, size, ids), in rank order, covering all dp*cp ranks. With a "
      "model preset, balanced_dynamic_cp minimises the full CP cost model (docs/schedulers.md); "
      "without, Megatron's L^2/cp workload.");
}

}  // namespace thdpack::python
