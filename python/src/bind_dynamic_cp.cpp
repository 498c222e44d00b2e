// Dynamic context parallelism: plans whose micro-batches split the dp*cp ranks into CP groups of
// their own size.

#include "bindings.hpp"
#include "thdpack/schedule/dynamic_cp.hpp"

namespace thdpack::python {

namespace {

/// plan[k] = [(first_rank, size, [ids...]), ...] for micro-batch k, groups in rank order.
py::list plan_to_python(const DynamicCpPlan& plan) {
  py::list out;
  for (const auto& mb : plan.microbatches) {
    py::list groups;
    for (const auto& g : mb.groups) groups.append(py::make_tuple(g.first_rank, g.size, g.ids));
    out.append(groups);
  }
  return out;
}

}  // namespace

void bind_dynamic_cp(py::module_& m) {
  m.def("dynamic_cp_scheduler_names", &dynamic_cp_scheduler_names);
  m.def(
      "schedule_dynamic_cp",
      [](const Array<int64_t>& padded_lengths, int dp, int cp, int64_t max_seqlen,
         const std::string& name, int multiple, int min_cp, const py::object& ids) {
        const std::vector<int64_t> lengths = vector_of(padded_lengths, "padded_lengths");
        std::vector<int64_t> id_values;
        if (ids.is_none()) {
          for (size_t i = 0; i < lengths.size(); ++i) id_values.push_back(static_cast<int64_t>(i));
        } else {
          id_values = vector_of(ids.cast<Array<int64_t>>(), "ids");
        }
        DynamicCpOptions o;
        o.dp = dp;
        o.cp = cp;
        o.max_seqlen_per_dp_cp_rank = max_seqlen;
        o.microbatch_multiple = multiple;
        o.min_cp = min_cp;
        DynamicCpPlan plan;
        {
          py::gil_scoped_release release;
          plan = schedule_dynamic_cp(name, id_values, lengths, o);
          check_dynamic_cp_plan(plan, id_values, lengths, o);
        }
        return plan_to_python(plan);
      },
      py::arg("padded_lengths"), py::kw_only(), py::arg("dp"), py::arg("cp"),
      py::arg("max_seqlen_per_dp_cp_rank"), py::arg("scheduler") = "default_dynamic_cp",
      py::arg("microbatch_multiple") = 1, py::arg("min_cp") = 1, py::arg("ids") = py::none(),
      "Plans one global batch with dynamic CP (no communication): plan[k] lists micro-batch k's "
      "CP groups as (first_rank, size, ids), in rank order, covering all dp*cp ranks.");
}

}  // namespace thdpack::python
