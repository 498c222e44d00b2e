// Communicators for Python: the callback communicator (torch.distributed and friends) and MPI
// through mpi4py.

#include "bindings.hpp"
#include "callback_communicator.hpp"
#ifdef THDPACK_HAVE_MPI
#include "thdpack/comm/mpi_communicator.hpp"
#endif

namespace thdpack::python {

void bind_comm(py::module_& m) {
  py::class_<Communicator, std::shared_ptr<Communicator>>(
      m, "Communicator", "A group of ranks that thdpack's collectives run over.")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("backend", &Communicator::backend)
      .def_property_readonly("stats",
                             [](const Communicator& c) {
                               py::dict d;
                               d["collectives"] = c.stats().collectives;
                               d["bytes_sent"] = c.stats().bytes_sent;
                               d["bytes_received"] = c.stats().bytes_received;
                               return d;
                             })
      .def("barrier", &Communicator::barrier, py::call_guard<py::gil_scoped_release>());

  py::class_<CallbackCommunicator, Communicator, std::shared_ptr<CallbackCommunicator>>(
      m, "CallbackCommunicator",
      "A communicator whose collectives are methods of a Python object (rank, size, allgatherv, "
      "alltoallv, broadcast, allreduce, barrier); see thdpack.comm.TorchCommunicator.")
      .def(py::init<py::object>(), py::arg("impl"));

#ifdef THDPACK_HAVE_MPI
  py::class_<MpiCommunicator, Communicator, std::shared_ptr<MpiCommunicator>>(
      m, "MpiCommunicator", "thdpack's MPI backend over a duplicate of an mpi4py communicator.")
      .def_static(
          "from_mpi4py",
          [](const py::object& comm, double timeout_seconds) {
            const py::object mpi = py::module_::import("mpi4py.MPI");
            const auto address = mpi.attr("_addressof")(comm).cast<uintptr_t>();
            const MPI_Comm handle = *reinterpret_cast<const MPI_Comm*>(address);
            return std::make_shared<MpiCommunicator>(handle, MpiOptions{timeout_seconds});
          },
          py::arg("comm"), py::arg("timeout_seconds") = 600.0,
          "Duplicates an mpi4py communicator (collective over it).");
  m.attr("HAVE_MPI") = true;
#else
  m.attr("HAVE_MPI") = false;
#endif
}

}  // namespace thdpack::python
