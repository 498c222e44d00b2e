#pragma once
#include "thdpack/core/language.hpp"  // C++20, or one clear error
// Multimodal intra-microbatch reordering (SPEC §8), the pure part: the per-sample cost, the
// balanced assignment of one global micro-batch's samples to canonical groups, which DP rank owns
// which group, the wire format of multimodal samples, and in-batch packing of a language shard.
// The exchange over a DP group is in reorder_exchange.hpp.
//
// Positions: a global micro-batch has B samples at positions 0..B-1. With G canonical groups of
// B/G samples, position p starts in its *home group* p / (B/G); DP rank r of a module with DP size
// d reads positions [r·B/d, (r+1)·B/d) ("scalable DP": each rank reads only its shard) and, after
// reordering, holds the groups [r·G/d, (r+1)·G/d). G = lcm of every module's DP size, so a vision
// module at dp 2 and a language module at dp 4 agree (vision rank r serves language ranks 2r and
// 2r+1) without talking to each other: both compute the same assignment from the same costs.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "thdpack/packing/packed_batch.hpp"

namespace thdpack {

// ---------------------------------------------------------------------------------------------
// Samples and their wire format

/// Element type of a sample field.
enum class FieldType : uint8_t { kUInt8 = 1, kInt32 = 2, kInt64 = 3, kFloat32 = 4, kBFloat16 = 5 };

/// Bytes per element (1, 4, 8, 4, 2).
int64_t field_type_size(FieldType type);
/// "uint8", "int32", "int64", "float32", "bfloat16".
std::string field_type_name(FieldType type);
/// The inverse of field_type_name; InvalidArgument naming the accepted names otherwise.
FieldType field_type_from_name(const std::string& name);

/// One named array of a sample: `shape` (row-major) and its raw bytes.
struct SampleField {
  FieldType type = FieldType::kInt64;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  ///< product(shape) · field_type_size(type) bytes

  int64_t elements() const;  ///< product(shape) (1 for a scalar, shape {})
  /// An int64 field of shape {values.size()}.
  static SampleField of_int64(std::span<const int64_t> values);
  /// A float32 field of the given shape (values.size() == product(shape)).
  static SampleField of_float32(std::span<const float> values, std::vector<int64_t> shape);
  /// The values as int64 (type must be kInt64; InvalidArgument otherwise).
  std::span<const int64_t> int64_values() const;
};

/// Names of the fields with a meaning to thdpack. Any other field travels as it is.
inline constexpr const char* kInputIdsField = "input_ids";        ///< int64 [L], required
inline constexpr const char* kLabelsField = "labels";             ///< int64 [L], optional (HF)
inline constexpr const char* kPixelValuesField = "pixel_values";  ///< [patches, dim]
inline constexpr const char* kImageGridField = "image_grid_thw";  ///< int64 [images, 3]

/// A multimodal sample: its global id and its fields by name (std::map: sorted key order, the
/// order on the wire). Text-only samples have no placeholders and zero rows of vision data.
struct MultimodalSample {
  int64_t id = 0;
  std::map<std::string, SampleField> fields;
};

/// The field names, element types and ranks (number of dimensions) every sample of a run has, in
/// sorted name order. All ranks of an exchange must use the same schema (checked).
struct FieldSpec {
  std::string name;
  FieldType type = FieldType::kInt64;
  int rank = 1;
};

struct SampleSchema {
  std::vector<FieldSpec> fields;  ///< sorted by name, unique (make_schema guarantees it)

  /// Total dimensions over all fields: the size of a sample's `dims` (see sample_dims).
  int64_t total_dims() const;
  /// A hash of names, types and ranks (equal schemas, equal fingerprints).
  uint64_t fingerprint() const;
};

/// A schema from field specs in any order; InvalidArgument on duplicate or empty names, a rank < 0,
/// or no int64 rank-1 "input_ids".
SampleSchema make_schema(std::vector<FieldSpec> fields);
/// The schema of one sample (its fields' names, types and ranks).
SampleSchema schema_of(const MultimodalSample& sample);

/// The sample's shapes, all fields in schema order concatenated (schema.total_dims() values): the
/// per-sample metadata from which a receiver knows every size, so no headers travel. Throws
/// InvalidArgument naming the sample id and field if a field is missing, extra, of another type or
/// rank, has a negative dimension, or its data size does not match its shape.
std::vector<int64_t> sample_dims(const MultimodalSample& sample, const SampleSchema& schema);

/// Bytes of a serialized sample with these dims: each field's bytes rounded up to a multiple of 8.
int64_t serialized_size(const SampleSchema& schema, std::span<const int64_t> dims);

/// Writes the sample's fields in schema (sorted key) order, each padded with zeros to 8 bytes.
/// `out.size()` must equal serialized_size (InvalidArgument otherwise).
void serialize_sample(const MultimodalSample& sample, const SampleSchema& schema,
                      std::span<std::byte> out);

/// The inverse of serialize_sample, sizes from `dims`; `in.size()` must equal serialized_size.
MultimodalSample deserialize_sample(std::span<const std::byte> in, const SampleSchema& schema,
                                    int64_t id, std::span<const int64_t> dims);

// ---------------------------------------------------------------------------------------------
// Cost

/// cost = vision_weight · patches + text_weight · real_tokens, where patches = (number of
/// `image_token_id` in input_ids) · spatial_merge_size², and real tokens are the input ids other
/// than `pad_id`. Derived from input_ids only, so every module and PP stage computes the same.
struct ReorderCost {
  double vision_weight = 1.0;
  double text_weight = 0.0;
  int64_t image_token_id = -1;  ///< the image placeholder token (-1: no vision tokens)
  int64_t spatial_merge_size = 2;
  int64_t pad_id = 0;
};

/// InvalidArgument for a negative or non-finite weight, spatial_merge_size < 1, or (when
/// `reordering`) both weights zero.
void validate(const ReorderCost& cost, bool reordering);

/// Placeholders in input_ids times spatial_merge_size².
int64_t image_patches(std::span<const int64_t> input_ids, const ReorderCost& cost);
/// Input ids other than pad_id.
int64_t real_tokens(std::span<const int64_t> input_ids, const ReorderCost& cost);
double sample_cost(std::span<const int64_t> input_ids, const ReorderCost& cost);

/// Checks that a sample's vision data agrees with its placeholders: with `image_grid_thw`
/// ([images, 3]) the sum of t·h·w equals the patches counted from input_ids; with `pixel_values`
/// its first dimension equals them too; `image_grid_thw` rows must have 3 positive values. A
/// sample without either field (a text-only run) has nothing to check. InvalidArgument naming the
/// sample id, the image count and both patch counts otherwise.
void check_vision_fields(const MultimodalSample& sample, const ReorderCost& cost);

// ---------------------------------------------------------------------------------------------
// Assignment

/// G = lcm of the module DP sizes (each >= 1; InvalidArgument otherwise or when empty).
int64_t canonical_groups(std::span<const int> module_dp_sizes);

/// The groups DP rank `rank` of a module of size `dp` owns: [rank·G/dp, (rank+1)·G/dp).
/// G must be a multiple of dp.
struct GroupRange {
  int64_t begin = 0;
  int64_t end = 0;
};
GroupRange owned_groups(int64_t groups, int dp, int rank);

/// The positions DP rank `rank` reads before reordering: [rank·B/dp, (rank+1)·B/dp).
GroupRange shard_positions(int64_t microbatch_size, int dp, int rank);

enum class AssignmentMethod {
  /// The reference (Megatron-Bridge): count-capped longest-first, samples by decreasing cost
  /// (ties by position) each into the cheapest group with room (ties by group index).
  kLongestFirst,
  /// Ours: longest-first, then pairwise swaps between the costliest group and the others while
  /// they lower the maximum; kept in place when the home placement is already as balanced;
  /// groups relabelled (and equal-cost samples swapped back) so that as few samples move as
  /// possible. Equal counts and determinism as the reference.
  kRefined,
};

struct AssignmentOptions {
  AssignmentMethod method = AssignmentMethod::kRefined;
  int64_t max_swaps = 1000;  ///< bound on refinement steps per micro-batch
};

/// Which samples of one global micro-batch form each canonical group.
struct GroupAssignment {
  int64_t groups = 1;
  std::vector<std::vector<int64_t>> members;  ///< [G] positions, increasing; B/G each
  std::vector<double> group_cost;             ///< [G] sum of member costs
  std::vector<int64_t> group_of;              ///< [B] the group of each position
};

/// Assigns B = costs.size() samples to `groups` groups of B/G. InvalidArgument when B is not a
/// multiple of G (naming both), G < 1, or a cost is negative or not finite. Pure and
/// deterministic: every rank computes the same from the same costs.
GroupAssignment assign_groups(std::span<const double> costs, int64_t groups,
                              const AssignmentOptions& options);

/// The home group of every position (p / (B/G)): the assignment that moves nothing.
GroupAssignment home_assignment(std::span<const double> costs, int64_t groups);

// ---------------------------------------------------------------------------------------------
// In-batch packing

struct InBatchPackOptions {
  int64_t pad_id = 0;        ///< trailing input ids equal to this are padding, not packed
  int64_t ignore_id = -100;  ///< label of padding rows
  int64_t divisor = 1;       ///< each sample's packed length is padded to a multiple of this
};

/// One [1, T] THD row from a language shard (samples in shard order), with the core packer:
/// each sample's input ids without trailing padding, its HF-style `labels` field when present
/// (trimmed alike), positions restarting per sample, labels ignore_id on padding rows,
/// cu_seqlens / cu_seqlens_padded. A shard of zero samples gives an empty pack.
PackedBatch pack_language_shard(std::span<const MultimodalSample> shard,
                                const InBatchPackOptions& options);

}  // namespace thdpack
