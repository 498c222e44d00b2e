#include "callback_communicator.hpp"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "bindings.hpp"
#include "thdpack/core/errors.hpp"

namespace thdpack::python {
namespace py = pybind11;
namespace {

// A numpy view of a buffer that outlives the call it is passed to (no copy; the capsule is only a
// base that keeps numpy from copying).
py::array_t<uint8_t> bytes_view(std::span<const std::byte> data) {
  if (data.empty()) return py::array_t<uint8_t>(0);
  auto* ptr = const_cast<std::byte*>(data.data());
  return py::array_t<uint8_t>(static_cast<py::ssize_t>(data.size()),
                              reinterpret_cast<uint8_t*>(ptr), py::capsule(ptr, [](void*) {}));
}

// The buffer format character of `info` without its byte-order prefix ('\0' for non-native order).
char format_char(const py::buffer_info& info) {
  std::string f = info.format;
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.erase(0, 1);
  return f.size() == 1 ? f[0] : '\0';
}

// Whether a result's elements are what the collective sent: bytes for the byte collectives,
// int64 or float64 for allreduce (a float64 result copied into int64 slots would be garbage).
template <typename T>
bool element_type_matches(const py::buffer_info& info) {
  const char f = format_char(info);
  if constexpr (std::is_same_v<T, std::byte>) {
    return info.itemsize == 1 && (f == 'B' || f == 'b' || f == 'c');
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return info.itemsize == 8 && (f == 'q' || f == 'l');
  } else {
    return info.itemsize == 8 && f == 'd';
  }
}

const char* element_type_name(std::byte) {
  return "uint8 bytes";
}
const char* element_type_name(int64_t) {
  return "int64";
}
const char* element_type_name(double) {
  return "float64";
}

// Copies a buffer result (numpy array, bytes, bytearray, memoryview, CPU tensor via numpy) of
// exactly `into.size()` elements of T; anything else is a CommError naming the operation.
template <typename T>
void copy_result(const py::object& result, std::span<T> into, const char* op) {
  if (!PyObject_CheckBuffer(result.ptr())) {
    throw CommError(std::string(op) + ": the Python communicator returned " +
                    std::string(py::str(py::type::handle_of(result).attr("__name__"))) +
                    ", expected a buffer (numpy array, bytes) of " + element_type_name(T{}));
  }
  const py::buffer_info info = py::reinterpret_borrow<py::buffer>(result).request();
  if (!element_type_matches<T>(info)) {
    fail<CommError>(op, ": the Python communicator returned elements of format '", info.format,
                    "' (", info.itemsize, " bytes), expected ", element_type_name(T{}));
  }
  const auto bytes = static_cast<size_t>(info.size * info.itemsize);
  if (bytes != into.size_bytes()) {
    fail<CommError>(op, ": the callback returned ", bytes, " bytes, expected ", into.size_bytes());
  }
  // memmove: a callback may return the very buffer it was given.
  if (bytes > 0) std::memmove(into.data(), info.ptr, bytes);
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "sum";
}

}  // namespace

std::string one_line_error(const std::exception& e) {
  std::string text = e.what();
  if (const auto* python = dynamic_cast<const py::error_already_set*>(&e)) {
    text = py::str(python->type().attr("__name__")).cast<std::string>();
    text.append(": ").append(py::str(python->value()).cast<std::string>());
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

namespace {

// Runs a Python call, turning its exceptions into CommError naming the operation.
template <typename F>
auto guarded(const char* op, F&& call) {
  py::gil_scoped_acquire gil;
  try {
    return call();
  } catch (py::error_already_set& e) {
    throw CommError(std::string(op) + " failed in the Python communicator: " + one_line_error(e));
  } catch (const py::cast_error& e) {
    throw CommError(std::string(op) + ": the Python communicator returned the wrong type (" +
                    e.what() + ")");
  }
}

int64_t total(std::span<const int64_t> counts) {
  int64_t t = 0;
  for (int64_t c : counts) t += c;
  return t;
}

}  // namespace

CallbackCommunicator::CallbackCommunicator(py::object impl) : impl_(std::move(impl)) {
  guarded("rank/size", [&] {
    rank_ = impl_.attr("rank").cast<int>();
    size_ = impl_.attr("size").cast<int>();
    backend_ =
        py::hasattr(impl_, "backend") ? impl_.attr("backend").cast<std::string>() : "callback";
  });
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    fail("communicator rank ", rank_, " / size ", size_, " is not valid");
  }
}

CallbackCommunicator::~CallbackCommunicator() {
  py::gil_scoped_acquire gil;
  impl_ = py::object();
}

void CallbackCommunicator::allgatherv(std::span<const std::byte> send, std::span<std::byte> recv,
                                      std::span<const int64_t> counts) {
  if (static_cast<int>(counts.size()) != size_ ||
      total(counts) != static_cast<int64_t>(recv.size()) ||
      counts[static_cast<size_t>(rank_)] != static_cast<int64_t>(send.size())) {
    throw CommError("allgatherv: counts do not match the buffers");
  }
  ++stats_.collectives;
  guarded("allgatherv", [&] {
    const py::object r = impl_.attr("allgatherv")(
        bytes_view(send), std::vector<int64_t>(counts.begin(), counts.end()));
    copy_result(r, recv, "allgatherv");
  });
  if (size_ > 1) {
    stats_.bytes_sent += static_cast<int64_t>(send.size()) * (size_ - 1);
    stats_.bytes_received += static_cast<int64_t>(recv.size() - send.size());
  }
}

void CallbackCommunicator::alltoallv(std::span<const std::byte> send,
                                     std::span<const int64_t> send_counts,
                                     std::span<std::byte> recv,
                                     std::span<const int64_t> recv_counts) {
  if (static_cast<int>(send_counts.size()) != size_ ||
      static_cast<int>(recv_counts.size()) != size_ ||
      total(send_counts) != static_cast<int64_t>(send.size()) ||
      total(recv_counts) != static_cast<int64_t>(recv.size())) {
    throw CommError("alltoallv: counts do not match the buffers");
  }
  ++stats_.collectives;
  guarded("alltoallv", [&] {
    std::vector<int64_t> sends(send_counts.begin(), send_counts.end());
    std::vector<int64_t> recvs(recv_counts.begin(), recv_counts.end());
    if (py::hasattr(impl_, "alltoallv_into")) {
      impl_.attr("alltoallv_into")(bytes_view(send), sends, bytes_view(recv), recvs);
      return;
    }
    const py::object r = impl_.attr("alltoallv")(bytes_view(send), sends, recvs);
    copy_result(r, recv, "alltoallv");
  });
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    stats_.bytes_sent += send_counts[static_cast<size_t>(r)];
    stats_.bytes_received += recv_counts[static_cast<size_t>(r)];
  }
}

std::unique_ptr<CommRequest> CallbackCommunicator::ialltoallv(
    std::span<const std::byte> send, std::span<const int64_t> send_counts,
    std::span<std::byte> recv, std::span<const int64_t> recv_counts) {
  alltoallv(send, send_counts, recv, recv_counts);
  struct Done final : CommRequest {
    void wait() override {}
    bool test() override { return true; }
  };
  return std::make_unique<Done>();
}

void CallbackCommunicator::broadcast(std::span<std::byte> data, int root) {
  if (root < 0 || root >= size_) fail<CommError>("broadcast: root ", root, " out of range");
  ++stats_.collectives;
  guarded("broadcast", [&] {
    if (py::hasattr(impl_, "broadcast_into")) {
      impl_.attr("broadcast_into")(bytes_view(data), root);
      return;
    }
    const py::object r = impl_.attr("broadcast")(bytes_view(data), root);
    copy_result(r, data, "broadcast");
  });
  if (size_ > 1) {
    if (rank_ == root) {
      stats_.bytes_sent += static_cast<int64_t>(data.size()) * (size_ - 1);
    } else {
      stats_.bytes_received += static_cast<int64_t>(data.size());
    }
  }
}

template <typename T>
void CallbackCommunicator::reduce(std::span<T> data, ReduceOp op) {
  ++stats_.collectives;
  guarded("allreduce", [&] {
    py::array_t<T> values(static_cast<py::ssize_t>(data.size()));
    std::copy(data.begin(), data.end(), values.mutable_data());
    const py::object r = impl_.attr("allreduce")(values, op_name(op));
    copy_result(r, data, "allreduce");
  });
  if (size_ > 1) {
    stats_.bytes_sent += static_cast<int64_t>(data.size_bytes());
    stats_.bytes_received += static_cast<int64_t>(data.size_bytes());
  }
}

void CallbackCommunicator::allreduce(std::span<int64_t> data, ReduceOp op) {
  reduce(data, op);
}
void CallbackCommunicator::allreduce(std::span<double> data, ReduceOp op) {
  reduce(data, op);
}

std::unique_ptr<Communicator> CallbackCommunicator::split(int, int) {
  throw CommError(
      "split: a callback communicator cannot split itself; create the groups in the framework "
      "(e.g. torch.distributed.new_group) and pass them to the pipeline");
}

void CallbackCommunicator::barrier() {
  ++stats_.collectives;
  guarded("barrier", [&] { impl_.attr("barrier")(); });
}

}  // namespace thdpack::python
