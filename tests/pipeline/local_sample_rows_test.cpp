// LocalSamples::write, which writes a sample's rows straight to the exchange buffer or a
// micro-batch: any run of rows of any sample equals the same rows of pack_samples' one-sample pack
// of the sample cut to its real length, for every kind of sample (plain, loss mask, labels,
// shifted labels with a mask, ignored labels), every padding divisor and truncation, through both
// the micro-batch and the wire layout. The same for SegmentWire in both of its formats, which
// also sends exactly the tokens the rows need in the tokens format, and the same bytes from a
// TP root's rows as from the sample.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "pipeline/pack_segments.hpp"
#include "pipeline/segment_wire.hpp"

namespace thdpack {
namespace {

constexpr int64_t kIgnore = -100;

Sample random_sample(std::mt19937_64& rng, int64_t id) {
  Sample s;
  s.id = id;
  const int64_t n = std::uniform_int_distribution<int64_t>(1, 40)(rng);
  for (int64_t j = 0; j < n; ++j) s.input_ids.push_back(static_cast<int64_t>(rng() % 1000));
  const int kind = static_cast<int>(rng() % 5);
  if (kind == 1 || kind == 4) {
    for (int64_t j = 0; j < n; ++j) s.loss_mask.push_back(rng() % 3 == 0 ? 0.0f : 1.0f);
  }
  if (kind == 2 || kind == 3 || kind == 4) {
    for (int64_t j = 0; j < n; ++j) {
      s.labels.push_back(rng() % 4 == 0 ? kIgnore : static_cast<int64_t>(rng() % 1000));
    }
    s.labels_shifted = kind == 3 || kind == 4;  // a mask beside labels needs shifted labels
  }
  return s;
}

// The rows a one-sample pack of `s` cut to `real` tokens holds: what write() must reproduce.
PackedBatch expected_rows(const Sample& s, int64_t real, const PackOptions& pack) {
  const Sample cut = detail::truncated(s, real);
  const SampleView view = view_of(cut);
  return pack_samples(std::span(&view, 1), pack);
}

// Padding divisor 1, 2, 4 or 8 and pad id 0, 1 or 2 by seed.
PackOptions seeded_pack(uint64_t seed) {
  PackOptions pack;
  pack.divisor = std::vector<int64_t>{1, 2, 4, 8}[seed % 4];
  pack.pad_id = static_cast<int64_t>(seed % 3);
  pack.ignore_id = kIgnore;
  return pack;
}

// Four random samples at batch positions 5.. (a DP rank whose samples do not start at 0), as
// LocalSamples reads them, with their real lengths by batch position (shorter than the sample
// where `truncate`); `plain`: without labels or loss masks.
struct SeededSamples {
  std::vector<Sample> samples;
  std::vector<int64_t> real = std::vector<int64_t>(5, 0);
  std::vector<SampleView> views;

  SeededSamples(std::mt19937_64& rng, bool truncate, bool plain) {
    for (int i = 0; i < 4; ++i) {
      Sample s = random_sample(rng, 100 + i);
      if (plain) {
        s.labels.clear();
        s.loss_mask.clear();
      }
      const auto n = static_cast<int64_t>(s.input_ids.size());
      real.push_back(truncate ? std::uniform_int_distribution<int64_t>(1, n)(rng) : n);
      samples.push_back(std::move(s));
    }
    for (const Sample& s : samples) views.push_back(view_of(s));
  }
};

// A random run of `rows` rows of the sample at batch position 5 + i.
detail::Segment random_segment(std::mt19937_64& rng, int i, int64_t rows) {
  const int64_t from = std::uniform_int_distribution<int64_t>(0, rows - 1)(rng);
  const int64_t length = std::uniform_int_distribution<int64_t>(1, rows - from)(rng);
  return {5 + i, from, length};
}

// Trial t's stage: tokens and labels, labels only, tokens only.
StageFields fields_of_trial(int trial) {
  return {.tokens = trial % 3 != 1, .labels = trial % 3 != 2};
}

// For each of the four samples (real lengths `real`, as batch positions 5..8) and six trials:
// check(i, its one-sample pack, a random run of its rows, the trial's stage fields).
template <typename Check>
void for_each_random_run(std::mt19937_64& rng, const SeededSamples& given,
                         std::span<const int64_t> real, const PackOptions& pack, Check check) {
  for (int i = 0; i < 4; ++i) {
    const PackedBatch want = expected_rows(given.samples[static_cast<size_t>(i)],
                                           real[static_cast<size_t>(5 + i)], pack);
    for (int trial = 0; trial < 6; ++trial) {
      check(i, want, random_segment(rng, i, want.num_rows()), fields_of_trial(trial));
    }
  }
}

TEST(LocalSampleRows, AnyRunOfRowsEqualsTheOneSamplePack) {
  int checked = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::mt19937_64 rng(seed);
    const PackOptions pack = seeded_pack(seed);
    const SeededSamples given(rng, seed % 2 == 1, false);
    const detail::LocalSamples local(given.views, 5, given.real, pack);
    for_each_random_run(
        rng, given, given.real, pack,
        [&](int i, const PackedBatch& want, const detail::Segment& seg, StageFields fields) {
          const int64_t from = seg.offset;
          const int64_t length = seg.length;

          // Into a micro-batch at row 3, and into a wire buffer.
          PackedBatch batch;
          batch.tokens.assign(static_cast<size_t>(length + 3), -7);
          batch.labels.assign(static_cast<size_t>(length + 3), -7);
          batch.loss_mask.assign(static_cast<size_t>(length + 3), -7.0f);
          local.write(seg, detail::batch_targets(batch, 3, fields));
          std::vector<std::byte> wire(static_cast<size_t>(detail::wire_bytes(length, fields)),
                                      std::byte{0x5a});
          local.write(seg, detail::wire_targets(wire.data(), length, fields));
          PackedBatch read;
          detail::append_received_rows(read, wire.data(), length, fields);

          for (int64_t j = 0; j < length; ++j) {
            const auto w = static_cast<size_t>(from + j);
            const auto b = static_cast<size_t>(3 + j);
            const auto r = static_cast<size_t>(j);
            SCOPED_TRACE("seed " + std::to_string(seed) + " sample " + std::to_string(i) + " row " +
                         std::to_string(from + j));
            if (fields.tokens) {
              ASSERT_EQ(batch.tokens[b], want.tokens[w]);
              ASSERT_EQ(read.tokens[r], want.tokens[w]);
            }
            if (fields.labels) {
              ASSERT_EQ(batch.labels[b], want.labels[w]);
              ASSERT_EQ(batch.loss_mask[b], want.loss_mask[w]);
              ASSERT_EQ(read.labels[r], want.labels[w]);
              ASSERT_EQ(read.loss_mask[r], want.loss_mask[w]);
            }
          }
          // Nothing outside the run, and no field not asked for, is written.
          for (size_t b = 0; b < 3; ++b) {
            ASSERT_EQ(batch.tokens[b], -7);
            ASSERT_EQ(batch.labels[b], -7);
          }
          if (!fields.tokens) {
            ASSERT_EQ(batch.tokens[3], -7);
          }
          if (!fields.labels) {
            ASSERT_EQ(batch.labels[3], -7);
          }
          // The wire bytes are all defined (alignment padding included).
          if (fields.labels && length % 2 == 1) {
            int32_t pad = -1;
            std::memcpy(&pad, wire.data() + wire.size() - 4, 4);
            ASSERT_EQ(pad, 0);
          }
          ++checked;
        });
  }
  EXPECT_EQ(checked, 300 * 4 * 6);
}

// A segment through SegmentWire: written to the wire and appended at the receiver, and appended
// locally, both after rows already there; `bytes` is what write() used.
struct WireTrip {
  PackedBatch received;
  PackedBatch local;
  int64_t bytes = 0;
};

WireTrip through_wire(const detail::SegmentWire& wire, const detail::LocalSamples& local,
                      const detail::Segment& seg, const PackedBatch& rows) {
  WireTrip t;
  t.bytes = wire.bytes(seg);
  std::vector<int64_t> buffer(static_cast<size_t>(t.bytes / 8) + 1, 0x5a5a);  // 8-byte aligned
  wire.write(local, seg, reinterpret_cast<std::byte*>(buffer.data()));
  EXPECT_EQ(buffer.back(), 0x5a5a) << "write() went past bytes()";
  for (PackedBatch* b : {&t.received, &t.local}) {
    b->tokens.assign(2, -7);
    b->labels.assign(2, -7);
    b->loss_mask.assign(2, -7.0f);
  }
  wire.append_received(t.received, seg, reinterpret_cast<const std::byte*>(buffer.data()));
  wire.append_local(t.local, seg, local);
  if (wire.tokens_only()) {
    // A TP root sends the same from the rows it holds (`rows`, the sample's whole pack).
    std::vector<int64_t> again(buffer.size(), 0x5a5a);
    wire.write_from_rows(rows, seg.offset, seg, reinterpret_cast<std::byte*>(again.data()));
    EXPECT_EQ(again, buffer) << "write_from_rows differs from write";
  }
  return t;
}

TEST(LocalSampleRows, SegmentWireInBothFormatsGivesTheOneSamplePackRows) {
  int tokens_format = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::mt19937_64 rng(seed);
    const PackOptions pack = seeded_pack(seed);
    // Even seeds: plain samples only (the tokens format); odd seeds: every kind (the rows format).
    const bool plain = seed % 2 == 0;
    const SeededSamples given(rng, seed % 3 != 0, plain);
    GlobalBatch batch;
    batch.samples_carry_targets = !plain;
    batch.real_lengths = given.real;
    const detail::LocalSamples local(given.views, 5, batch.real_lengths, pack);
    for_each_random_run(
        rng, given, batch.real_lengths, pack,
        [&](int i, const PackedBatch& want, const detail::Segment& seg, StageFields fields) {
          const int64_t real = batch.real_lengths[static_cast<size_t>(5 + i)];
          const int64_t from = seg.offset;
          const int64_t length = seg.length;
          const detail::SegmentWire wire(batch, fields, pack);
          ASSERT_EQ(wire.tokens_only(), plain);
          const WireTrip trip = through_wire(wire, local, seg, want);
          SCOPED_TRACE("seed " + std::to_string(seed) + " sample " + std::to_string(i) + " rows " +
                       std::to_string(from) + "+" + std::to_string(length));
          if (plain) {
            // The real rows' tokens for tokens, their successors for labels (all but the sample's
            // last row have one); with both, the real rows' tokens and the next one where the last
            // real row's label needs it.
            const int64_t real_rows = std::clamp<int64_t>(real - from, 0, length);
            const int64_t labelled =
                std::max<int64_t>(0, std::min(from + real_rows, real - 1) - from);
            const bool next = real_rows > 0 && from + real_rows < real;
            const int64_t tokens = fields.tokens && fields.labels ? real_rows + (next ? 1 : 0)
                                   : fields.tokens                ? real_rows
                                                                  : labelled;
            ASSERT_EQ(trip.bytes, 8 * tokens);
            ++tokens_format;
          } else {
            ASSERT_EQ(trip.bytes, detail::wire_bytes(length, fields));
          }
          for (const PackedBatch* got : {&trip.received, &trip.local}) {
            ASSERT_EQ(got->tokens.size(), static_cast<size_t>(fields.tokens ? 2 + length : 2));
            ASSERT_EQ(got->labels.size(), static_cast<size_t>(fields.labels ? 2 + length : 2));
            ASSERT_EQ(got->loss_mask.size(), got->labels.size());
            ASSERT_EQ(got->tokens[1], -7);  // the rows already there are kept
            ASSERT_EQ(got->labels[1], -7);
            for (int64_t j = 0; j < length; ++j) {
              const auto w = static_cast<size_t>(from + j);
              const auto g = static_cast<size_t>(2 + j);
              if (fields.tokens) {
                ASSERT_EQ(got->tokens[g], want.tokens[w]) << "row " << from + j;
              }
              if (fields.labels) {
                ASSERT_EQ(got->labels[g], want.labels[w]) << "row " << from + j;
                ASSERT_EQ(got->loss_mask[g], want.loss_mask[w]) << "row " << from + j;
              }
            }
          }
        });
  }
  EXPECT_EQ(tokens_format, 150 * 4 * 6);
}

}  // namespace
}  // namespace thdpack
