#include "pipeline/sample_exchange.hpp"

#include <memory>
#include <span>
#include <string>

#include "thdpack/core/errors.hpp"

namespace thdpack::detail {

std::span<std::byte> ScratchBuffer::get(int64_t bytes) {
  if (bytes > size_) {
    data_.reset();  // the old buffer goes before the new one is touched
    const auto grown = bytes + static_cast<int64_t>(kHeadroom * static_cast<double>(bytes));
    data_.reset(new std::byte[static_cast<size_t>(grown)]);
    size_ = grown;
  }
  return {data_.get(), static_cast<size_t>(bytes)};
}

void exchange_samples(Communicator& dp_group, const StepGeometry& geometry,
                      const LocalSamples& local, const SegmentWire& wire, ExchangeBuffers& buffers,
                      std::vector<PackedBatch>& microbatches) {
  const int me = dp_group.rank();
  const int dp = dp_group.size();
  const auto k_count = static_cast<int64_t>(microbatches.size());

  // Sizes: both sides walk the same segments in the same (micro-batch, segment) order.
  std::vector<int64_t> send_counts(static_cast<size_t>(dp), 0);
  std::vector<int64_t> recv_counts(static_cast<size_t>(dp), 0);
  for (int r = 0; r < dp; ++r) {
    for (int64_t k = 0; k < k_count; ++k) {
      for (const Segment& s : geometry.pack(k, r).segments) {
        if (s.sample == Segment::kTailRows) continue;
        const int src = geometry.source_of(s.sample);
        if (src == r) continue;  // stays on its DP rank
        if (src == me) send_counts[static_cast<size_t>(r)] += wire.bytes(s);
        if (r == me) recv_counts[static_cast<size_t>(src)] += wire.bytes(s);
      }
    }
  }
  int64_t send_total = 0, recv_total = 0;
  std::vector<int64_t> recv_offset(static_cast<size_t>(dp), 0);
  for (int r = 0; r < dp; ++r) {
    send_total += send_counts[static_cast<size_t>(r)];
    recv_offset[static_cast<size_t>(r)] = recv_total;
    recv_total += recv_counts[static_cast<size_t>(r)];
  }

  // Uninitialised buffers: every byte is written (by SegmentWire::write, or by the alltoallv)
  // before it is read.
  const std::span<std::byte> send = buffers.send.get(send_total);
  std::byte* out = send.data();
  for (int r = 0; r < dp; ++r) {
    if (r == me) continue;
    for (int64_t k = 0; k < k_count; ++k) {
      for (const Segment& s : geometry.pack(k, r).segments) {
        if (s.sample == Segment::kTailRows || geometry.source_of(s.sample) != me) continue;
        wire.write(local, s, out);
        out += wire.bytes(s);
      }
    }
  }
  if (out != send.data() + send_total) throw InternalError("exchange: send buffer size mismatch");

  const std::span<std::byte> recv = buffers.recv.get(recv_total);
  dp_group.alltoallv(send, send_counts, recv, recv_counts);

  std::vector<int64_t> cursor = recv_offset;
  auto source_of = [&geometry](int64_t sample) { return geometry.source_of(sample); };
  auto peer_of = [](int source) { return source; };
  for (int64_t k = 0; k < k_count; ++k) {
    append_rows(microbatches[static_cast<size_t>(k)], geometry.pack(k, me).segments, wire, local,
                me, source_of, peer_of, recv.data(), cursor);
  }
  for (int s = 0; s < dp; ++s) {
    const int64_t consumed = cursor[static_cast<size_t>(s)] - recv_offset[static_cast<size_t>(s)];
    check<InternalError>(consumed == recv_counts[static_cast<size_t>(s)], "exchange: consumed ",
                         consumed, " of ", recv_counts[static_cast<size_t>(s)],
                         " bytes received from DP rank ", s);
  }
}

namespace {

// Rows format: every micro-batch's rows of `fields`, padding included, in one run each.
void broadcast_packed_rows(Communicator& tp_group, StageFields fields, ScratchBuffer& scratch,
                           std::vector<PackedBatch>& microbatches) {
  const bool root = tp_group.rank() == 0;
  int64_t total = 0;
  for (const PackedBatch& m : microbatches) total += wire_bytes(m.num_rows(), fields);
  const std::span<std::byte> buffer = scratch.get(total);
  if (root) {
    std::byte* out = buffer.data();
    for (const PackedBatch& m : microbatches) {
      const int64_t rows = m.num_rows();
      write_rows(m, 0, rows, fields, out);
      out += wire_bytes(rows, fields);
    }
  }
  tp_group.broadcast(buffer, 0);
  if (!root) {
    const std::byte* in = buffer.data();
    for (PackedBatch& m : microbatches) {
      const int64_t rows = m.num_rows();
      append_received_rows(m, in, rows, fields);
      in += wire_bytes(rows, fields);
    }
  }
}

// Tokens format: segment by segment, as the exchange sends them (no padding, no tail rows); the
// root rebuilds each window from the rows it holds.
void broadcast_token_windows(Communicator& tp_group, const SegmentWire& wire,
                             std::span<const std::span<const Segment>> segments,
                             ScratchBuffer& scratch, std::vector<PackedBatch>& microbatches) {
  const bool root = tp_group.rank() == 0;
  int64_t total = 0;
  for (const std::span<const Segment> pack : segments) {
    for (const Segment& s : pack) {
      if (s.sample != Segment::kTailRows) total += wire.bytes(s);
    }
  }
  const std::span<std::byte> buffer = scratch.get(total);
  if (root) {
    std::byte* out = buffer.data();
    for (size_t k = 0; k < microbatches.size(); ++k) {
      int64_t at = 0;
      for (const Segment& s : segments[k]) {
        if (s.sample != Segment::kTailRows) {
          wire.write_from_rows(microbatches[k], at, s, out);
          out += wire.bytes(s);
        }
        at += s.length;
      }
    }
  }
  tp_group.broadcast(buffer, 0);
  if (!root) {
    const std::byte* in = buffer.data();
    for (size_t k = 0; k < microbatches.size(); ++k) {
      for (const Segment& s : segments[k]) {
        if (s.sample == Segment::kTailRows) {
          wire.append_tail(microbatches[k], s.length);
        } else {
          wire.append_received(microbatches[k], s, in);
          in += wire.bytes(s);
        }
      }
    }
  }
}

}  // namespace

void broadcast_rows(Communicator& tp_group, const SegmentWire& wire,
                    std::span<const std::span<const Segment>> segments, ScratchBuffer& scratch,
                    std::vector<PackedBatch>& microbatches) {
  const StageFields fields = wire.fields();
  if (tp_group.size() == 1 || (!fields.tokens && !fields.labels)) return;
  if (wire.tokens_only()) {
    broadcast_token_windows(tp_group, wire, segments, scratch, microbatches);
  } else {
    broadcast_packed_rows(tp_group, fields, scratch, microbatches);
  }
}

}  // namespace thdpack::detail
