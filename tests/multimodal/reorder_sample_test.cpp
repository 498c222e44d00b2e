// Multimodal samples and their wire format (SPEC §8): field types, SampleField helpers, schemas and
// their fingerprints, sample_dims errors, serialized sizes, the zero padding between fields and
// serialize/deserialize round trips on hand-made samples and 500 random ones.

#include <gtest/gtest.h>

#include "expect_throw.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {
namespace {

using I64 = std::vector<int64_t>;
using Bytes = std::vector<std::byte>;

template <typename T>
Bytes bytes_of(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

SampleField raw_field(FieldType type, I64 shape, Bytes data) {
  SampleField f;
  f.type = type;
  f.shape = std::move(shape);
  f.data = std::move(data);
  return f;
}

SampleField int64_field(const I64& values, I64 shape) {
  return raw_field(FieldType::kInt64, std::move(shape), bytes_of(values));
}

// A sample with two images: grid rows (1,2,4) and (1,2,2) = 12 patches, pixel_values [12, 3].
MultimodalSample vision_sample(int64_t id) {
  MultimodalSample s;
  s.id = id;
  const I64 ids = {11, 12, 900, 900, 13, 900, 14, 15, 16, 17};
  s.fields[kInputIdsField] = SampleField::of_int64(ids);
  s.fields[kImageGridField] = int64_field({1, 2, 4, 1, 2, 2}, {2, 3});
  std::vector<float> pixels(12 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = 0.25f * static_cast<float>(i) - 3.0f;
  s.fields[kPixelValuesField] = SampleField::of_float32(pixels, {12, 3});
  return s;
}

void expect_same_sample(const MultimodalSample& a, const MultimodalSample& b) {
  EXPECT_EQ(a.id, b.id);
  ASSERT_EQ(a.fields.size(), b.fields.size());
  for (const auto& [name, fa] : a.fields) {
    const auto it = b.fields.find(name);
    ASSERT_NE(it, b.fields.end()) << "field " << name << " lost";
    const SampleField& fb = it->second;
    EXPECT_EQ(fa.type, fb.type) << name;
    EXPECT_EQ(fa.shape, fb.shape) << name;
    EXPECT_TRUE(fa.data == fb.data)
        << name << ": data differs (" << fa.data.size() << " vs " << fb.data.size() << " bytes)";
  }
}

/// Serializes `sample` into a buffer pre-filled with `fill`, checks its size, deserializes it with
/// another id and compares. Returns the buffer.
Bytes round_trip(const MultimodalSample& sample, std::byte fill = std::byte{0xA5}) {
  const SampleSchema schema = schema_of(sample);
  const I64 dims = sample_dims(sample, schema);
  EXPECT_EQ(static_cast<int64_t>(dims.size()), schema.total_dims());
  const int64_t size = serialized_size(schema, dims);
  EXPECT_EQ(size % 8, 0);
  Bytes buffer(static_cast<size_t>(size), fill);
  serialize_sample(sample, schema, buffer);
  const int64_t new_id = sample.id + 1000;
  MultimodalSample back = deserialize_sample(buffer, schema, new_id, dims);
  EXPECT_EQ(back.id, new_id);
  back.id = sample.id;
  expect_same_sample(sample, back);
  return buffer;
}

// ---------------------------------------------------------------------------------------------
// Field types

TEST(ReorderSampleFieldType, SizesAndNames) {
  EXPECT_EQ(field_type_size(FieldType::kUInt8), 1);
  EXPECT_EQ(field_type_size(FieldType::kInt32), 4);
  EXPECT_EQ(field_type_size(FieldType::kInt64), 8);
  EXPECT_EQ(field_type_size(FieldType::kFloat32), 4);
  EXPECT_EQ(field_type_size(FieldType::kBFloat16), 2);
  EXPECT_EQ(field_type_name(FieldType::kUInt8), "uint8");
  EXPECT_EQ(field_type_name(FieldType::kInt32), "int32");
  EXPECT_EQ(field_type_name(FieldType::kInt64), "int64");
  EXPECT_EQ(field_type_name(FieldType::kFloat32), "float32");
  EXPECT_EQ(field_type_name(FieldType::kBFloat16), "bfloat16");
}

TEST(ReorderSampleFieldType, NameRoundTrip) {
  for (FieldType t : {FieldType::kUInt8, FieldType::kInt32, FieldType::kInt64, FieldType::kFloat32,
                      FieldType::kBFloat16}) {
    EXPECT_EQ(field_type_from_name(field_type_name(t)), t) << field_type_name(t);
  }
}

TEST(ReorderSampleFieldType, UnknownNameListsTheAcceptedOnes) {
  for (const std::string bad : {"float16", "", "INT64", "int"}) {
    test_util::expect_throw_with<InvalidArgument>(
        [&] { field_type_from_name(bad); }, {"uint8", "int32", "int64", "float32", "bfloat16"});
  }
}

// ---------------------------------------------------------------------------------------------
// SampleField

TEST(ReorderSampleField, OfInt64) {
  const I64 values = {5, -7, 9, int64_t{1} << 40};
  const SampleField f = SampleField::of_int64(values);
  EXPECT_EQ(f.type, FieldType::kInt64);
  EXPECT_EQ(f.shape, (I64{4}));
  EXPECT_EQ(f.elements(), 4);
  ASSERT_EQ(f.data.size(), 32u);
  EXPECT_TRUE(f.data == bytes_of(values));
  const auto back = f.int64_values();
  EXPECT_EQ(I64(back.begin(), back.end()), values);
}

TEST(ReorderSampleField, OfInt64Empty) {
  const SampleField f = SampleField::of_int64(std::span<const int64_t>{});
  EXPECT_EQ(f.type, FieldType::kInt64);
  EXPECT_EQ(f.shape, (I64{0}));
  EXPECT_EQ(f.elements(), 0);
  EXPECT_TRUE(f.data.empty());
  EXPECT_TRUE(f.int64_values().empty());
}

TEST(ReorderSampleField, OfFloat32) {
  const std::vector<float> values = {0.5f, -1.25f, 3.0f, 4.5f, 1e-3f, -0.0f};
  const SampleField f = SampleField::of_float32(values, {2, 3});
  EXPECT_EQ(f.type, FieldType::kFloat32);
  EXPECT_EQ(f.shape, (I64{2, 3}));
  EXPECT_EQ(f.elements(), 6);
  EXPECT_TRUE(f.data == bytes_of(values));
}

TEST(ReorderSampleField, ElementsIsTheProductOfTheShape) {
  SampleField f;
  f.shape = {};
  EXPECT_EQ(f.elements(), 1);  // a scalar
  f.shape = {7};
  EXPECT_EQ(f.elements(), 7);
  f.shape = {2, 3, 4};
  EXPECT_EQ(f.elements(), 24);
  f.shape = {4, 0, 2};
  EXPECT_EQ(f.elements(), 0);
}

TEST(ReorderSampleField, Int64ValuesOfAnotherTypeIsAnError) {
  const SampleField f = SampleField::of_float32(std::vector<float>{1.0f, 2.0f}, {2});
  EXPECT_THROW(f.int64_values(), InvalidArgument);
  const SampleField u = raw_field(FieldType::kInt32, {2}, Bytes(8));
  EXPECT_THROW(u.int64_values(), InvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Schemas

TEST(ReorderSampleSchema, MakeSchemaSortsByName) {
  const SampleSchema s = make_schema({{"pixel_values", FieldType::kFloat32, 2},
                                      {"input_ids", FieldType::kInt64, 1},
                                      {"attention_mask", FieldType::kUInt8, 1},
                                      {"image_grid_thw", FieldType::kInt64, 2},
                                      {"scale", FieldType::kFloat32, 0}});
  std::vector<std::string> names;
  for (const auto& f : s.fields) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"attention_mask", "image_grid_thw", "input_ids",
                                             "pixel_values", "scale"}));
  EXPECT_EQ(s.fields[0].type, FieldType::kUInt8);
  EXPECT_EQ(s.fields[3].type, FieldType::kFloat32);
  EXPECT_EQ(s.fields[3].rank, 2);
  EXPECT_EQ(s.fields[4].rank, 0);
  EXPECT_EQ(s.total_dims(), 1 + 2 + 1 + 2 + 0);
}

TEST(ReorderSampleSchema, MakeSchemaRejectsBadSpecs) {
  const FieldSpec ids{"input_ids", FieldType::kInt64, 1};
  EXPECT_THROW(make_schema({ids, {"pixel_values", FieldType::kFloat32, 2}, ids}), InvalidArgument);
  EXPECT_THROW(make_schema({ids, {"x", FieldType::kFloat32, 2}, {"x", FieldType::kInt64, 1}}),
               InvalidArgument);
  EXPECT_THROW(make_schema({ids, {"", FieldType::kFloat32, 1}}), InvalidArgument);
  EXPECT_THROW(make_schema({ids, {"pixel_values", FieldType::kFloat32, -1}}), InvalidArgument);
  // input_ids: required, int64, rank 1.
  EXPECT_THROW(make_schema({}), InvalidArgument);
  EXPECT_THROW(make_schema({{"pixel_values", FieldType::kFloat32, 2}}), InvalidArgument);
  EXPECT_THROW(make_schema({{"input_ids", FieldType::kInt32, 1}}), InvalidArgument);
  EXPECT_THROW(make_schema({{"input_ids", FieldType::kInt64, 2}}), InvalidArgument);
  EXPECT_THROW(make_schema({{"input_ids", FieldType::kInt64, 0}}), InvalidArgument);
  // The minimal schema is fine.
  EXPECT_EQ(make_schema({ids}).total_dims(), 1);
}

TEST(ReorderSampleSchema, FingerprintFollowsNamesTypesAndRanks) {
  const std::vector<FieldSpec> base = {{"input_ids", FieldType::kInt64, 1},
                                       {"pixel_values", FieldType::kFloat32, 2},
                                       {"image_grid_thw", FieldType::kInt64, 2}};
  const uint64_t fp = make_schema(base).fingerprint();
  EXPECT_EQ(make_schema(base).fingerprint(), fp);
  // Order of the specs does not matter: the schema is sorted.
  EXPECT_EQ(make_schema({base[2], base[0], base[1]}).fingerprint(), fp);

  auto changed = base;
  changed[1].type = FieldType::kBFloat16;
  EXPECT_NE(make_schema(changed).fingerprint(), fp) << "type change";
  changed = base;
  changed[1].rank = 3;
  EXPECT_NE(make_schema(changed).fingerprint(), fp) << "rank change";
  changed = base;
  changed[1].name = "pixel_valuez";
  EXPECT_NE(make_schema(changed).fingerprint(), fp) << "name change";
  changed = base;
  changed.push_back({"labels", FieldType::kInt64, 1});
  EXPECT_NE(make_schema(changed).fingerprint(), fp) << "extra field";
  changed = base;
  changed.pop_back();
  EXPECT_NE(make_schema(changed).fingerprint(), fp) << "missing field";
}

TEST(ReorderSampleSchema, SchemaOfASample) {
  const SampleSchema s = schema_of(vision_sample(3));
  ASSERT_EQ(s.fields.size(), 3u);
  EXPECT_EQ(s.fields[0].name, kImageGridField);
  EXPECT_EQ(s.fields[0].type, FieldType::kInt64);
  EXPECT_EQ(s.fields[0].rank, 2);
  EXPECT_EQ(s.fields[1].name, kInputIdsField);
  EXPECT_EQ(s.fields[1].rank, 1);
  EXPECT_EQ(s.fields[2].name, kPixelValuesField);
  EXPECT_EQ(s.fields[2].type, FieldType::kFloat32);
  EXPECT_EQ(s.fields[2].rank, 2);
  EXPECT_EQ(s.fingerprint(), make_schema({{kPixelValuesField, FieldType::kFloat32, 2},
                                          {kInputIdsField, FieldType::kInt64, 1},
                                          {kImageGridField, FieldType::kInt64, 2}})
                                 .fingerprint());
}

// ---------------------------------------------------------------------------------------------
// sample_dims

TEST(ReorderSampleDims, ShapesInSchemaOrder) {
  const MultimodalSample s = vision_sample(3);
  EXPECT_EQ(sample_dims(s, schema_of(s)), (I64{2, 3, 10, 12, 3}));
}

TEST(ReorderSampleDims, ErrorsNameTheSampleAndField) {
  const SampleSchema schema = schema_of(vision_sample(0));
  const int64_t id = 4242;
  {
    MultimodalSample s = vision_sample(id);
    s.fields.erase(kPixelValuesField);
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "pixel_values"});
  }
  {
    MultimodalSample s = vision_sample(id);
    s.fields["zz_extra"] = SampleField::of_int64(I64{1, 2});
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "zz_extra"});
  }
  {
    MultimodalSample s = vision_sample(id);
    s.fields["aa_extra"] = SampleField::of_int64(I64{1, 2});
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "aa_extra"});
  }
  {  // another type with the same byte count
    MultimodalSample s = vision_sample(id);
    s.fields[kPixelValuesField].type = FieldType::kInt32;
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "pixel_values"});
  }
  {  // another rank with the same element count
    MultimodalSample s = vision_sample(id);
    s.fields[kPixelValuesField].shape = {36};
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "pixel_values"});
  }
  {  // data one element short
    MultimodalSample s = vision_sample(id);
    s.fields[kImageGridField].data.resize(5 * 8);
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "image_grid_thw"});
  }
  {  // data one byte too long
    MultimodalSample s = vision_sample(id);
    s.fields[kInputIdsField].data.push_back(std::byte{0});
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "input_ids"});
  }
  {  // a negative dimension
    MultimodalSample s = vision_sample(id);
    s.fields[kPixelValuesField] = raw_field(FieldType::kFloat32, {-2, -3}, Bytes(24));
    test_util::expect_throw_with<InvalidArgument>([&] { sample_dims(s, schema); },
                                                  {"4242", "pixel_values"});
  }
}

// ---------------------------------------------------------------------------------------------
// serialized_size

TEST(ReorderSampleSize, EachFieldRoundedUpToEightBytes) {
  const SampleSchema vl = make_schema({{kImageGridField, FieldType::kInt64, 2},
                                       {kInputIdsField, FieldType::kInt64, 1},
                                       {kPixelValuesField, FieldType::kFloat32, 2}});
  // grid [2,3] int64 = 48, input_ids [5] = 40, pixels [3,3] float32 = 36 -> 40.
  EXPECT_EQ(serialized_size(vl, I64{2, 3, 5, 3, 3}), 48 + 40 + 40);
  // text-only: no grid rows, no pixel rows.
  EXPECT_EQ(serialized_size(vl, I64{0, 3, 7, 0, 64}), 56);
  // empty everything.
  EXPECT_EQ(serialized_size(vl, I64{0, 3, 0, 0, 64}), 0);

  // Rounding is per field: two 3-byte fields take 16 bytes, not 8.
  const SampleSchema odd = make_schema({{"a", FieldType::kUInt8, 1},
                                        {"b", FieldType::kUInt8, 1},
                                        {"c", FieldType::kBFloat16, 1},
                                        {"d", FieldType::kInt32, 1},
                                        {"e", FieldType::kFloat32, 0},
                                        {kInputIdsField, FieldType::kInt64, 1}});
  // a:3 -> 8, b:8 -> 8, c:3·2=6 -> 8, d:3·4=12 -> 16, e: scalar 4 -> 8, input_ids:1 -> 8.
  EXPECT_EQ(serialized_size(odd, I64{3, 8, 3, 3, 1}), 8 + 8 + 8 + 16 + 8 + 8);
  // a:9 -> 16, b:0 -> 0, c:4·2=8 -> 8, d:1·4 -> 8, e -> 8, input_ids:0 -> 0.
  EXPECT_EQ(serialized_size(odd, I64{9, 0, 4, 1, 0}), 16 + 0 + 8 + 8 + 8 + 0);
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(ReorderSampleWire, VisionSampleRoundTripInSortedKeyOrder) {
  const MultimodalSample s = vision_sample(17);
  const Bytes buffer = round_trip(s);
  // grid [2,3] int64 (48 bytes), then input_ids (80 bytes), then pixel_values (144 bytes).
  ASSERT_EQ(buffer.size(), 48u + 80u + 144u);
  const auto& grid = s.fields.at(kImageGridField).data;
  const auto& ids = s.fields.at(kInputIdsField).data;
  const auto& pixels = s.fields.at(kPixelValuesField).data;
  EXPECT_TRUE(std::equal(grid.begin(), grid.end(), buffer.begin()));
  EXPECT_TRUE(std::equal(ids.begin(), ids.end(), buffer.begin() + 48));
  EXPECT_TRUE(std::equal(pixels.begin(), pixels.end(), buffer.begin() + 128));
}

TEST(ReorderSampleWire, TextOnlySampleRoundTrip) {
  MultimodalSample s;
  s.id = 5;
  s.fields[kInputIdsField] = SampleField::of_int64(I64{3, 1, 4, 1, 5, 9, 2});
  s.fields[kImageGridField] = int64_field({}, {0, 3});
  s.fields[kPixelValuesField] = SampleField::of_float32(std::vector<float>{}, {0, 16});
  const Bytes buffer = round_trip(s);
  EXPECT_EQ(buffer.size(), 56u);
  const MultimodalSample back =
      deserialize_sample(buffer, schema_of(s), s.id, sample_dims(s, schema_of(s)));
  EXPECT_EQ(back.fields.at(kImageGridField).shape, (I64{0, 3}));
  EXPECT_EQ(back.fields.at(kPixelValuesField).shape, (I64{0, 16}));
}

TEST(ReorderSampleWire, EmptySampleRoundTrip) {
  MultimodalSample s;
  s.id = 8;
  s.fields[kInputIdsField] = SampleField::of_int64(std::span<const int64_t>{});
  const Bytes buffer = round_trip(s);
  EXPECT_TRUE(buffer.empty());
}

TEST(ReorderSampleWire, OddSizedFieldsArePaddedWithZeros) {
  MultimodalSample s;
  s.id = 77;
  s.fields["a_bytes"] =
      raw_field(FieldType::kUInt8, {3}, {std::byte{1}, std::byte{2}, std::byte{3}});
  s.fields["b_half"] = raw_field(FieldType::kBFloat16, {3},
                                 {std::byte{0x11}, std::byte{0x22}, std::byte{0x33},
                                  std::byte{0x44}, std::byte{0x55}, std::byte{0x66}});
  s.fields["c_scalar"] = SampleField::of_float32(std::vector<float>{2.5f}, {});
  s.fields[kInputIdsField] = SampleField::of_int64(I64{-1});
  const Bytes buffer = round_trip(s, std::byte{0xFF});
  ASSERT_EQ(buffer.size(), 32u);
  // a_bytes at 0..2, zeros 3..7; b_half at 8..13, zeros 14..15; c_scalar at 16..19, zeros 20..23.
  EXPECT_EQ(buffer[0], std::byte{1});
  EXPECT_EQ(buffer[2], std::byte{3});
  for (size_t i : {3u, 4u, 5u, 6u, 7u, 14u, 15u, 20u, 21u, 22u, 23u}) {
    EXPECT_EQ(buffer[i], std::byte{0}) << "padding byte " << i;
  }
  EXPECT_EQ(buffer[8], std::byte{0x11});
  EXPECT_EQ(buffer[13], std::byte{0x66});
  float scalar = 0;
  std::memcpy(&scalar, buffer.data() + 16, sizeof scalar);
  EXPECT_EQ(scalar, 2.5f);
  int64_t id0 = 0;
  std::memcpy(&id0, buffer.data() + 24, sizeof id0);
  EXPECT_EQ(id0, -1);
}

TEST(ReorderSampleWire, WrongBufferSizeIsAnError) {
  const MultimodalSample s = vision_sample(9);
  const SampleSchema schema = schema_of(s);
  const I64 dims = sample_dims(s, schema);
  const auto size = static_cast<size_t>(serialized_size(schema, dims));
  for (size_t wrong : {size - 8, size - 1, size + 1, size + 8, size_t{0}}) {
    Bytes buffer(wrong);
    EXPECT_THROW(serialize_sample(s, schema, buffer), InvalidArgument) << wrong;
    EXPECT_THROW(deserialize_sample(buffer, schema, 9, dims), InvalidArgument) << wrong;
  }
}

TEST(ReorderSampleWire, SerializeChecksTheSampleAgainstTheSchema) {
  const MultimodalSample s = vision_sample(31);
  const SampleSchema schema = schema_of(s);
  MultimodalSample bad = s;
  bad.fields.erase(kImageGridField);
  Bytes buffer(static_cast<size_t>(serialized_size(schema, sample_dims(s, schema))));
  test_util::expect_throw_with<InvalidArgument>([&] { serialize_sample(bad, schema, buffer); },
                                                {"31", "image_grid_thw"});
}

// ---------------------------------------------------------------------------------------------
// Property: random samples round trip byte-exact

MultimodalSample random_sample(std::mt19937_64& rng, int64_t id) {
  static const FieldType kTypes[] = {FieldType::kUInt8, FieldType::kInt32, FieldType::kInt64,
                                     FieldType::kFloat32, FieldType::kBFloat16};
  static const char* kNames[] = {"attention_mask", "image_grid_thw",     "labels",
                                 "pixel_values",   "video_grid_thw",     "z",
                                 "_meta",          "pixel_values_videos"};
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto random_bytes = [&](size_t n) {
    Bytes b(n);
    for (auto& x : b) x = static_cast<std::byte>(rng() & 0xFF);
    return b;
  };
  MultimodalSample s;
  s.id = id;
  const auto length = static_cast<size_t>(uniform(0, 40));
  s.fields[kInputIdsField] =
      raw_field(FieldType::kInt64, {static_cast<int64_t>(length)}, random_bytes(length * 8));
  const int64_t extra = uniform(0, 5);
  for (int64_t k = 0; k < extra; ++k) {
    const std::string name = kNames[uniform(0, static_cast<int64_t>(std::size(kNames)) - 1)];
    const FieldType type = kTypes[uniform(0, static_cast<int64_t>(std::size(kTypes)) - 1)];
    const int64_t rank = uniform(0, 3);
    I64 shape;
    int64_t elements = 1;
    for (int64_t d = 0; d < rank; ++d) {
      shape.push_back(uniform(0, 7));
      elements *= shape.back();
    }
    s.fields[name] =
        raw_field(type, shape, random_bytes(static_cast<size_t>(elements * field_type_size(type))));
  }
  return s;
}

TEST(ReorderSampleWire, RandomSamplesRoundTripByteExact) {
  std::mt19937_64 rng(20240517);
  for (int64_t i = 0; i < 500; ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    const MultimodalSample s = random_sample(rng, i);
    const SampleSchema schema = schema_of(s);
    const I64 dims = sample_dims(s, schema);
    // Size: every field's bytes rounded up to 8.
    int64_t expected_size = 0;
    for (const auto& [name, f] : s.fields) {
      expected_size += (static_cast<int64_t>(f.data.size()) + 7) / 8 * 8;
    }
    ASSERT_EQ(serialized_size(schema, dims), expected_size);
    Bytes buffer(static_cast<size_t>(expected_size), std::byte{0xC3});
    serialize_sample(s, schema, buffer);
    // Layout: fields in sorted key order, each followed by zeros up to a multiple of 8.
    size_t at = 0;
    for (const auto& [name, f] : s.fields) {
      ASSERT_TRUE(std::equal(f.data.begin(), f.data.end(), buffer.begin() + at)) << name;
      const size_t padded = (f.data.size() + 7) / 8 * 8;
      for (size_t j = at + f.data.size(); j < at + padded; ++j) {
        ASSERT_EQ(buffer[j], std::byte{0}) << name << " padding byte " << j;
      }
      at += padded;
    }
    const MultimodalSample back = deserialize_sample(buffer, schema, s.id, dims);
    expect_same_sample(s, back);
    // Serializing the copy gives the same bytes.
    Bytes again(buffer.size(), std::byte{0x5A});
    serialize_sample(back, schema, again);
    ASSERT_TRUE(again == buffer);
  }
}

}  // namespace
}  // namespace thdpack
