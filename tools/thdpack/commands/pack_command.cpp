// `thdpack pack`: offline packing of a whole dataset into packs of capacity C, written as a pack
// file that training jobs read back as THD rows (and optionally as a Megatron indexed dataset whose
// documents are the packs). `thdpack convert`: any dataset source to a Megatron indexed dataset.

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "commands/memory_check.hpp"
#include "flags/flag_values.hpp"
#include "flags/static_shape_flags.hpp"
#include "flags/workload_source.hpp"
#include "reports/json_output.hpp"
#include "reports/pack_html_report.hpp"
#include "reports/progress.hpp"
#include "reports/table.hpp"
#include "thdpack/core/checked_arithmetic.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/bridge_parquet.hpp"
#include "thdpack/data/indexed_dataset.hpp"
#include "thdpack/data/output_file.hpp"
#include "thdpack/data/pack_file.hpp"
#include "thdpack/packing/offline_packing.hpp"
#include "thdpack/pipeline/pipeline.hpp"

namespace thdpack::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// How many samples --limit selects: all when not given; more than the dataset holds is an error.
int64_t limited_size(const Dataset& dataset, int64_t limit) {
  if (limit > dataset.size()) {
    fail("--limit ", limit, " is more than the ", dataset.size(), " samples of ",
         dataset.describe());
  }
  return limit > 0 ? limit : dataset.size();
}

// The first `limit` lengths (all when limit is 0); straight from the index for indexed datasets.
std::vector<int64_t> read_lengths(const Dataset& dataset, int64_t limit, bool progress) {
  const int64_t n = limited_size(dataset, limit);
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  if (const auto* indexed = dynamic_cast<const IndexedDataset*>(&dataset)) {
    const auto all = indexed->lengths();
    std::copy(all.begin(), all.begin() + n, lengths.begin());
    return lengths;
  }
  Progress bar("reading lengths", n, progress);
  constexpr int64_t kChunk = 1 << 16;
  for (int64_t i = 0; i < n; ++i) {
    lengths[static_cast<size_t>(i)] = dataset.length(i);
    if ((i + 1) % kChunk == 0) bar.advance(kChunk);
  }
  bar.finish();
  return lengths;
}

struct PackFlags {
  WorkloadFlags source;
  int64_t capacity = 0;
  std::string strategy = "bfd";
  int64_t divisor = 1;
  int64_t seed = -1;
  int64_t group_size = 0;
  int64_t limit = 0;
  int64_t stream_open_packs = 0;
  std::string out;
  std::string materialize;
  std::string parquet_out;  // Megatron-Bridge packed Parquet shards
  int64_t parquet_shard_packs = BridgeParquetOptions{}.packs_per_shard;
  std::string dtype = "int32";
  std::string report;
  bool tokens_only = false;
  bool json = false;
  bool no_progress = false;
  StaticShapeFlags shapes;

  bool static_shapes() const {
    return shapes.tail_align != "none" || shapes.fixed_cu_seqlens_entries > 0;
  }
};

// Static shapes: a pack with more samples than --fixed-cu-seqlens-entries allows is cut into
// consecutive pieces (the same cap a pipeline's plan keeps); returns the rows of all packs once
// each is aligned as a reader with these options packs it (PackedDataset::batch).
int64_t apply_static_shapes(const PackFlags& f, std::span<const int64_t> lengths,
                            OfflinePacking& result) {
  PipelineOptions pipeline;
  f.shapes.apply_to(pipeline);
  pipeline.max_seqlen_per_dp_cp_rank = f.capacity;
  const int64_t room = schedule_options_of(pipeline).max_sequences_per_pack;
  if (room > 0 && f.group_size > 0) {
    throw InvalidArgument(
        "--fixed-cu-seqlens-entries cannot be combined with --group-size (a "
        "group is never cut, so a pack's sequence count is not bounded)");
  }
  if (room > 0) {
    Bins capped;
    for (int64_t p = 0; p < result.packs.count(); ++p) {
      const auto pack = result.packs.bin(p);
      for (size_t at = 0; at < pack.size(); at += static_cast<size_t>(room)) {
        const size_t end = std::min(pack.size(), at + static_cast<size_t>(room));
        capped.items.insert(capped.items.end(), pack.begin() + static_cast<std::ptrdiff_t>(at),
                            pack.begin() + static_cast<std::ptrdiff_t>(end));
        capped.offsets.push_back(static_cast<int64_t>(capped.items.size()));
      }
    }
    result.packs = std::move(capped);
    result.fill = static_cast<double>(result.padded_tokens) /
                  (static_cast<double>(result.packs.count()) * static_cast<double>(f.capacity));
  }
  PackOptions shape;
  shape.divisor = f.divisor;
  shape.capacity = f.capacity;
  f.shapes.apply_to(shape);
  int64_t rows = 0;
  for (int64_t p = 0; p < result.packs.count(); ++p) {
    int64_t padded = 0;
    for (int64_t i : result.packs.bin(p))
      padded += round_up(lengths[static_cast<size_t>(i)], f.divisor);
    rows = checked_add(rows, aligned_pack_rows(padded, shape), "the rows of the packs");
  }
  return rows;
}

// Streaming mode: samples in input order through a bounded number of open packs.
Bins pack_streaming(std::span<const int64_t> lengths, const PackFlags& f) {
  StreamingPacker packer(f.capacity, f.stream_open_packs, f.divisor);
  std::vector<std::vector<int64_t>> closed;
  Bins out;
  auto drain = [&] {
    for (auto& pack : closed) {
      out.items.insert(out.items.end(), pack.begin(), pack.end());
      out.offsets.push_back(static_cast<int64_t>(out.items.size()));
    }
    closed.clear();
  };
  for (size_t i = 0; i < lengths.size(); ++i) {
    packer.add(static_cast<int64_t>(i), lengths[i], closed);
    drain();
  }
  packer.flush(closed);
  drain();
  return out;
}

// A Megatron indexed dataset holds tokens only: writing a sample's loss_mask or labels away
// silently would make SFT train on its prompt tokens, so that takes --tokens-only. Returns whether
// `s` had any to drop.
bool carries_targets(const Sample& s, const std::string& source, bool tokens_only) {
  if (s.loss_mask.empty() && s.labels.empty()) return false;
  if (tokens_only) return true;
  fail("sample ", s.id, " of ", source, " carries ", s.loss_mask.empty() ? "labels" : "loss_mask",
       ", which a Megatron indexed dataset cannot hold (training on it would learn the prompt "
       "tokens too); a pack file (thdpack pack --out) keeps it, or pass --tokens-only to drop it");
}

void warn_dropped(int64_t dropped) {
  if (dropped > 0) {
    std::cerr << "warning: --tokens-only dropped the loss_mask/labels of " << dropped
              << " samples\n";
  }
}

void materialize(const PackedDataset& packed, const std::string& prefix, TokenDType dtype,
                 bool tokens_only, bool progress) {
  IndexedDatasetWriter writer(prefix, dtype);
  Progress bar("writing packs", packed.num_packs(), progress);
  int64_t dropped = 0;
  for (int64_t p = 0; p < packed.num_packs(); ++p) {
    for (int64_t id : packed.pack(p)) {
      const Sample s = packed.dataset().sample(id);
      dropped += carries_targets(s, packed.dataset().describe(), tokens_only);
      writer.add_sequence(s.input_ids);
    }
    writer.end_document();
    bar.advance();
  }
  bar.finish();
  writer.finish();
  warn_dropped(dropped);
}

// Packing holds about this many bytes per sample at its peak (lengths, sort keys, packs, ids).
constexpr int64_t kPackBytesPerSample = 80;

// Refuses, before anything is allocated for it, a source too large to pack in the memory this
// process may use (a mock config's "size" of 10^12, say).
void require_memory_for(int64_t samples) {
  require_memory(
      static_cast<double>(samples) * kPackBytesPerSample,
      message("packing ", samples, " samples (", kPackBytesPerSample, " bytes per sample)"),
      "pack fewer (--limit N) or a smaller source");
}

// Converting holds each sequence's length, pointer and document index (about this many bytes).
constexpr int64_t kConvertBytesPerSequence = 24;

// Every output is checked against the inputs (the source's files stay leased while the workload
// lives) and against the others before any of them is written.
void check_outputs(const PackFlags& f) {
  if (!f.materialize.empty() && f.out.empty()) {
    throw InvalidArgument("--materialize needs --out (the pack file it is written from)");
  }
  std::vector<std::string> outputs;
  if (!f.out.empty()) outputs.push_back(f.out);
  if (!f.materialize.empty()) {
    outputs.push_back(f.materialize + ".bin");
    outputs.push_back(f.materialize + ".idx");
  }
  if (!f.report.empty()) outputs.push_back(f.report);
  refuse_replacing_inputs(outputs);
  // --materialize reads the pack file back: neither of its files may be the pack file.
  const size_t materialized = f.materialize.empty() ? 0 : 2;
  for (size_t i = 1; i <= materialized; ++i) {
    if (std::filesystem::weakly_canonical(outputs[i]) == std::filesystem::weakly_canonical(f.out)) {
      fail("--materialize ", f.materialize, " would write ", outputs[i],
           ", which is the pack file of --out; give another prefix");
    }
  }
  // The report may not replace another output.
  if (!f.report.empty()) {
    for (size_t i = 0; i + 1 < outputs.size(); ++i) {
      if (std::filesystem::weakly_canonical(outputs[i]) ==
          std::filesystem::weakly_canonical(f.report)) {
        fail("--report ", f.report, " is the same file as the output ", outputs[i],
             "; write the report somewhere else");
      }
    }
  }
}

// The packs of `lengths` by the flags' strategy (offline, or streaming with --stream), with their
// bounds and fill.
OfflinePacking pack_lengths(const PackFlags& f, const std::vector<int64_t>& lengths) {
  if (f.stream_open_packs > 0) {
    if (f.group_size > 0) throw InvalidArgument("--stream does not support --group-size");
    OfflinePacking result;
    result.packs = pack_streaming(lengths, f);
    std::vector<int64_t> padded(lengths.size());
    for (size_t i = 0; i < lengths.size(); ++i) {
      padded[i] = round_up(lengths[i], f.divisor);
      result.padded_tokens = checked_add(result.padded_tokens, padded[i], "the padded tokens");
    }
    result.lower_bound_l1 = bins_lower_bound_l1(padded, f.capacity);
    result.lower_bound_l2 = bins_lower_bound_l2(padded, f.capacity);
    result.fill = static_cast<double>(result.padded_tokens) /
                  (static_cast<double>(result.packs.count()) * static_cast<double>(f.capacity));
    return result;
  }
  OfflinePackOptions o;
  o.capacity = f.capacity;
  o.divisor = f.divisor;
  o.strategy = pack_strategy_from_name(f.strategy);
  if (f.seed >= 0) o.shuffle_seed = static_cast<uint64_t>(f.seed);
  std::vector<int64_t> groups;
  if (f.group_size > 0) {
    for (size_t i = 0; i < lengths.size(); ++i) {
      groups.push_back(static_cast<int64_t>(i) / f.group_size);
    }
    o.group_ids = groups;
  }
  return pack_offline(lengths, o);
}

// Seconds each part of a pack run took.
struct PackTimes {
  double open = 0, read = 0, pack = 0, write = 0, total = 0;
};

void print_pack_json(const PackFlags& f, const ResolvedWorkload& w, size_t samples,
                     const OfflinePacking& result, int64_t rows, double over_l2,
                     const PackTimes& t) {
  nlohmann::json j = {{"source", w.description},
                      {"samples", samples},
                      {"padded_tokens", result.padded_tokens},
                      {"capacity", f.capacity},
                      {"strategy", f.stream_open_packs > 0 ? "stream" : f.strategy},
                      {"packs", result.packs.count()},
                      {"lower_bound_l1", result.lower_bound_l1},
                      {"lower_bound_l2", result.lower_bound_l2},
                      {"packs_over_l2", over_l2},
                      {"fill", result.fill},
                      {"rows", rows},
                      {"static_shapes",
                       {{"tail_align", f.shapes.tail_align},
                        {"tail_multiple", f.shapes.tail_multiple},
                        {"tail_policy", f.shapes.tail_policy},
                        {"fixed_cu_seqlens_entries", f.shapes.fixed_cu_seqlens_entries}}},
                      {"seconds",
                       {{"open", t.open},
                        {"read_lengths", t.read},
                        {"pack", t.pack},
                        {"write", t.write},
                        {"total", t.total}}},
                      {"out", f.out}};
  std::cout << json_text(j, 2) << '\n';
}

void print_pack_text(const PackFlags& f, const ResolvedWorkload& w, size_t samples,
                     const std::string& strategy, const OfflinePacking& result, int64_t rows,
                     double over_l2, const PackTimes& t) {
  std::cout << "source     " << w.description << '\n'
            << "samples    " << samples << " (" << result.padded_tokens
            << " padded tokens), capacity " << f.capacity << ", divisor " << f.divisor << '\n'
            << "strategy   " << strategy << '\n'
            << "packs      " << result.packs.count() << " (L1 bound " << result.lower_bound_l1
            << ", L2 bound " << result.lower_bound_l2 << ": " << fixed(100 * over_l2, 3)
            << "% over L2), fill " << fixed(100 * result.fill, 3) << "%\n";
  if (f.static_shapes()) {
    std::cout << "shapes     tail-align " << f.shapes.tail_align << ", tail-policy "
              << f.shapes.tail_policy << ", cu_seqlens entries "
              << (f.shapes.fixed_cu_seqlens_entries > 0
                      ? std::to_string(f.shapes.fixed_cu_seqlens_entries)
                      : std::string("not fixed"))
              << ": " << rows << " rows, "
              << fixed(100.0 * static_cast<double>(rows - result.padded_tokens) /
                           static_cast<double>(std::max<int64_t>(rows, 1)),
                       3)
              << "% of them tail padding\n";
  }
  std::cout << "time       " << fixed(t.total, 3) << " s (open " << fixed(t.open, 3) << ", lengths "
            << fixed(t.read, 3) << ", pack " << fixed(t.pack, 3) << ", write " << fixed(t.write, 3)
            << "), " << scaled(static_cast<double>(samples) / std::max(t.total, 1e-9))
            << " samples/s\n";
  if (!f.out.empty()) std::cout << "wrote      " << f.out << '\n';
  if (!f.materialize.empty()) std::cout << "wrote      " << f.materialize << ".bin/.idx\n";
  if (!f.parquet_out.empty()) {
    std::cout << "wrote      " << f.parquet_out << " (Megatron-Bridge packed Parquet)\n";
  }
  if (!f.report.empty()) std::cout << "wrote      " << f.report << '\n';
}

int run_pack(const PackFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  // Every output (pack file, materialized dataset, report) goes into place only once all are
  // complete: a failure on the last replaces none of them.
  DeferredCommits outputs;
  require_source(f.source, "pack");
  const ResolvedWorkload w = resolve_workload(f.source);
  PackTimes t;
  t.open = seconds_since(start);
  check_outputs(f);
  require_memory_for(f.limit > 0 ? std::min(f.limit, w.dataset->size()) : w.dataset->size());
  const auto read_start = std::chrono::steady_clock::now();
  const std::vector<int64_t> lengths = read_lengths(*w.dataset, f.limit, !f.no_progress);
  t.read = seconds_since(read_start);

  const auto pack_start = std::chrono::steady_clock::now();
  OfflinePacking result = pack_lengths(f, lengths);
  const int64_t rows = apply_static_shapes(f, lengths, result);
  t.pack = seconds_since(pack_start);

  if (!f.out.empty()) {
    const auto write_start = std::chrono::steady_clock::now();
    PackSource source = w.source;
    if (w.source_fingerprint) {
      // The dataset read gives a JSONL source's index and options to the file.
      write_pack_file(f.out, result.packs, f.capacity, f.divisor, source, *w.source_fingerprint,
                      *w.dataset);
    } else {
      write_pack_file(f.out, result.packs, f.capacity, f.divisor, source);
    }
    t.write = seconds_since(write_start);
    if (!f.materialize.empty()) {
      // The pack file is read back from its complete temporary file: messages name the output.
      const std::string written = outputs.readable_path(f.out);
      std::unique_ptr<PackedDataset> packed;
      try {
        packed = PackedDataset::open(written);
      } catch (const InvalidArgument& e) {
        std::string text = e.what();
        for (size_t at; (at = text.find(written)) != std::string::npos;) {
          text.replace(at, written.size(), f.out);
        }
        throw InvalidArgument(text);
      }
      materialize(*packed, f.materialize, token_dtype_from_name(f.dtype), f.tokens_only,
                  !f.no_progress);
    }
  }

  if (!f.parquet_out.empty()) {
    BridgeParquetOptions options;
    options.packs_per_shard = f.parquet_shard_packs;
    const auto bridge_start = std::chrono::steady_clock::now();
    write_bridge_parquet(*w.dataset, result.packs, f.parquet_out, options);
    t.write += seconds_since(bridge_start);
  }

  const std::string strategy =
      (f.stream_open_packs > 0 ? "stream (" + std::to_string(f.stream_open_packs) + " open packs)"
                               : f.strategy) +
      (f.group_size > 0 ? ", groups of " + std::to_string(f.group_size) : "") +
      (f.seed >= 0 ? ", shuffled with seed " + std::to_string(f.seed) : "");
  if (!f.report.empty()) {
    write_pack_html_report(f.report,
                           {w.description, strategy, f.capacity, f.divisor, lengths, result});
  }

  outputs.commit_all();
  t.total = seconds_since(start);
  const double over_l2 =
      result.lower_bound_l2 > 0
          ? static_cast<double>(result.packs.count()) / static_cast<double>(result.lower_bound_l2) -
                1
          : 0;
  if (f.json) {
    print_pack_json(f, w, lengths.size(), result, rows, over_l2, t);
  } else {
    print_pack_text(f, w, lengths.size(), strategy, result, rows, over_l2, t);
  }
  return 0;
}

struct ConvertFlags {
  WorkloadFlags source;
  std::string out;
  std::string dtype = "int32";
  int64_t limit = 0;
  bool lengths_only = false;
  bool tokens_only = false;
  bool no_progress = false;
  bool json = false;
};

int run_convert(const ConvertFlags& f) {
  if (f.out.empty()) throw InvalidArgument("--out PREFIX is required");
  require_source(f.source, "convert");
  const ResolvedWorkload w = resolve_workload(f.source);
  const int64_t n = limited_size(*w.dataset, f.limit);
  require_memory(static_cast<double>(n) * kConvertBytesPerSequence,
                 message("converting ", n, " sequences (the index holds ", kConvertBytesPerSequence,
                         " bytes per sequence)"),
                 "convert fewer (--limit N) or a smaller source");
  IndexedDatasetWriter writer(f.out, token_dtype_from_name(f.dtype));
  Progress bar("converting", n, !f.no_progress);
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (f.lengths_only) {
      writer.add_length_only(w.dataset->length(i));
    } else {
      const Sample s = w.dataset->sample(i);
      dropped += carries_targets(s, w.description, f.tokens_only);
      writer.add_sequence(s.input_ids);
    }
    if ((i + 1) % 4096 == 0) bar.advance(4096);
  }
  bar.finish();
  writer.finish();
  if (f.json) {
    const nlohmann::json j = {{"source", w.description},
                              {"out", {f.out + ".bin", f.out + ".idx"}},
                              {"sequences", n},
                              {"dtype", f.dtype},
                              {"lengths_only", f.lengths_only},
                              {"targets_dropped", dropped}};
    std::cout << json_text(j, 2) << '\n';
  } else {
    std::cout << "wrote " << f.out << ".bin/.idx: " << n << " sequences from " << w.description
              << (f.lengths_only ? " (lengths only: tokens read as 0)" : "") << '\n';
  }
  warn_dropped(dropped);
  return 0;
}

}  // namespace

Command add_pack_command(CLI::App& app) {
  auto f = std::make_shared<PackFlags>();
  auto* cmd = app.add_subcommand(
      "pack",
      "pack a whole dataset offline into packs of --capacity tokens (a pack file that "
      "training reads back as THD rows)");
  f->source.add_to(*cmd);
  cmd->add_option("--capacity,-C", f->capacity, "tokens per pack (padded)")
      ->check(positive_integer())
      ->required();
  cmd->add_option("--strategy", f->strategy, "bfd (default), ffd or next-fit")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--divisor", f->divisor, "pad each sample to a multiple of this (2*cp with CP)")
      ->check(positive_integer())
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "shuffle the pack order (or, for next-fit, the samples)")
      ->check(non_negative_integer());
  cmd->add_option("--group-size", f->group_size,
                  "keep each run of this many consecutive samples in one pack (GRPO groups, "
                  "preference pairs)")
      ->check(positive_integer());
  cmd->add_option("--limit", f->limit, "pack only the first N samples (at most the dataset's size)")
      ->check(positive_integer());
  cmd->add_option("--stream", f->stream_open_packs,
                  "streaming mode: input order with at most this many open packs")
      ->check(positive_integer());
  cmd->add_option("--out,-o", f->out, "write the pack file here")->check(non_empty());
  cmd->add_option(
         "--materialize", f->materialize,
         "also write the packs as a Megatron indexed dataset PREFIX (one document per pack)")
      ->check(non_empty());
  cmd->add_option("--parquet-out", f->parquet_out,
                  "also write the packs as Megatron-Bridge packed Parquet: a new or empty FOLDER "
                  "of shard-NNNNN.idx.parquet files, one row per pack (input_ids, loss_mask, "
                  "seq_start_id)")
      ->check(non_empty());
  cmd->add_option("--parquet-shard-packs", f->parquet_shard_packs,
                  "packs (rows) per --parquet-out file")
      ->check(positive_integer())
      ->capture_default_str();
  cmd->add_option("--dtype", f->dtype, "token dtype of --materialize")
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--report", f->report,
                  "write a self-contained HTML page with pictures of the packing (packs against "
                  "the bounds, pack fill, padding)")
      ->check(non_empty());
  cmd->add_flag("--tokens-only", f->tokens_only,
                "let --materialize drop the loss_mask / labels of JSONL samples (refused without "
                "this flag; the pack file keeps them)");
  cmd->add_flag("--json", f->json, "print the summary as JSON");
  cmd->add_flag("--no-progress", f->no_progress, "no progress bar");
  f->shapes.add_to(*cmd);

  return {cmd, [f] { return run_pack(*f); }};
}

Command add_convert_command(CLI::App& app) {
  auto c = std::make_shared<ConvertFlags>();
  auto* cmd = app.add_subcommand(
      "convert", "write any dataset source (JSONL, mock, indexed) as a Megatron indexed dataset");
  c->source.add_to(*cmd);
  cmd->add_option("--out,-o", c->out, "output prefix (PREFIX.bin, PREFIX.idx)")
      ->check(non_empty())
      ->required();
  cmd->add_option("--dtype", c->dtype, "token dtype")->check(non_empty())->capture_default_str();
  cmd->add_option("--limit", c->limit, "only the first N samples (at most the dataset's size)")
      ->check(positive_integer());
  cmd->add_flag("--tokens-only", c->tokens_only,
                "drop the loss_mask / labels of JSONL samples (refused without this flag)");
  cmd->add_flag("--lengths-only", c->lengths_only,
                "write the index only; .bin becomes a sparse file of zeros (benchmarks)");
  cmd->add_flag("--no-progress", c->no_progress, "no progress bar");
  cmd->add_flag("--json", c->json, "print the summary as JSON");
  return {cmd, [c] { return run_convert(*c); }};
}

}  // namespace thdpack::cli
