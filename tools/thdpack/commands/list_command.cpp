// `thdpack list`: the named workloads, schedulers and model presets.

#include <iostream>

#include "commands.hpp"
#include "reports/table.hpp"
#include "thdpack/data/workloads.hpp"
#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/scheduler.hpp"

namespace thdpack::cli {

Command add_list_command(CLI::App& app) {
  auto* parser = app.add_subcommand("list", "list named workloads, schedulers and model presets");
  return {parser, [] {
            std::cout << "workloads:\n";
            Table workloads({"name", "M", "cp", "reference batches (dp: samples)", "lengths"});
            for (const auto& name : workload_names()) {
              const Workload w = workload(name);
              std::string refs;
              for (const auto& [dp, batch] : w.reference_batches) {
                refs +=
                    (refs.empty() ? "" : ", ") + std::to_string(dp) + ": " + std::to_string(batch);
              }
              workloads.add_row({w.name, std::to_string(w.max_seqlen_per_dp_cp_rank),
                                 std::to_string(w.cp), refs, w.description});
            }
            workloads.left_align(3);
            workloads.left_align(4);
            workloads.print(std::cout);
            std::cout << "\nschedulers:\n";
            for (const auto& name : scheduler_names()) {
              std::cout << "  " << name << ": " << make_scheduler(name)->description() << '\n';
            }
            std::cout << "\nmodel presets:\n";
            Table models({"name", "hidden", "layers", "heads", "kv", "head dim", "ffn", "vocab",
                          "top-k", "GFLOP/token"});
            for (const auto& name : model_preset_names()) {
              const ModelSpec m = model_preset(name);
              models.add_row({m.name, std::to_string(m.hidden), std::to_string(m.layers),
                              std::to_string(m.heads), std::to_string(m.kv_heads),
                              std::to_string(m.head_dim), std::to_string(m.ffn),
                              std::to_string(m.vocab), std::to_string(m.moe_topk),
                              fixed(training_flops_coefficients(m).per_token / 1e9, 1)});
            }
            models.print(std::cout);
            return 0;
          }};
}

}  // namespace thdpack::cli
