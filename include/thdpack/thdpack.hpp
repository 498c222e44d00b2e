#pragma once
// Everything of thdpack (link thdpack::thdpack), one block per domain, lowest layer first. The MPI
// backend is not included because it needs <mpi.h>: include "thdpack/comm/mpi_communicator.hpp" and
// link thdpack::mpi for it.

#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/core/topology.hpp"

#include "thdpack/packing/bin_packing.hpp"
#include "thdpack/packing/cp_partition.hpp"
#include "thdpack/packing/offline_packing.hpp"
#include "thdpack/packing/packed_batch.hpp"
#include "thdpack/packing/thd_layout.hpp"

#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/jsonl_dataset.hpp"
#include "thdpack/data/lengths_file.hpp"
#include "thdpack/data/mock_dataset.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/data/workloads.hpp"

#include "thdpack/schedule/cost_model.hpp"
#include "thdpack/schedule/flops.hpp"
#include "thdpack/schedule/global_batch.hpp"
#include "thdpack/schedule/plan_stats.hpp"
#include "thdpack/schedule/scheduler.hpp"

#include "thdpack/multimodal/reorder.hpp"
#include "thdpack/multimodal/vl_workload.hpp"

#include "thdpack/moe/moe_routing.hpp"

#include "thdpack/comm/communicator.hpp"
#include "thdpack/comm/local_communicator.hpp"
#include "thdpack/comm/process_groups.hpp"

#include "thdpack/pipeline/moe_dispatch.hpp"
#include "thdpack/pipeline/pipeline.hpp"
#include "thdpack/pipeline/reorder_exchange.hpp"
#include "thdpack/pipeline/step_verification.hpp"
