// Multimodal samples, their schema and their wire format (reorder.hpp).

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/counter_rng.hpp"
#include "core/name_lookup.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/multimodal/reorder.hpp"

namespace thdpack {
namespace {

struct FieldTypeInfo {
  FieldType type;
  const char* name;
  int64_t size;
};

constexpr FieldTypeInfo kFieldTypes[] = {
    {FieldType::kUInt8, "uint8", 1},       {FieldType::kInt32, "int32", 4},
    {FieldType::kInt64, "int64", 8},       {FieldType::kFloat32, "float32", 4},
    {FieldType::kBFloat16, "bfloat16", 2},
};

const FieldTypeInfo& info_of(FieldType type) {
  for (const auto& info : kFieldTypes) {
    if (info.type == type) return info;
  }
  fail("unknown field type code ", static_cast<int>(type));
}

int64_t round_up_8(int64_t bytes) {
  return (bytes + 7) / 8 * 8;
}

/// Product of dims with an overflow check; `what` names the field in the message.
int64_t checked_product(std::span<const int64_t> dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    check(d >= 0, what, " has a negative dimension ", d);
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 16 / d) {
      fail(what, " is too large (its element count overflows)");
    }
    n *= d;
  }
  return n;
}

std::string field_label(int64_t id, const std::string& name) {
  return "sample " + std::to_string(id) + " field '" + name + "'";
}

void check_size(size_t got, int64_t expected, const char* what) {
  check(static_cast<int64_t>(got) == expected, what, " buffer has ", got,
        " bytes but the sample's serialized size is ", expected);
}

}  // namespace

int64_t field_type_size(FieldType type) {
  return info_of(type).size;
}

std::string field_type_name(FieldType type) {
  return info_of(type).name;
}

FieldType field_type_from_name(const std::string& name) {
  std::vector<std::string> known;
  for (const auto& info : kFieldTypes) {
    if (name == info.name) return info.type;
    known.emplace_back(info.name);
  }
  detail::throw_unknown_name("field type", name, known);
}

int64_t SampleField::elements() const {
  return checked_product(shape, "field");
}

SampleField SampleField::of_int64(std::span<const int64_t> values) {
  SampleField f;
  f.type = FieldType::kInt64;
  f.shape = {static_cast<int64_t>(values.size())};
  f.data.resize(values.size_bytes());
  if (!values.empty()) std::memcpy(f.data.data(), values.data(), values.size_bytes());
  return f;
}

SampleField SampleField::of_float32(std::span<const float> values, std::vector<int64_t> shape) {
  SampleField f;
  f.type = FieldType::kFloat32;
  f.shape = std::move(shape);
  if (f.elements() != static_cast<int64_t>(values.size())) {
    fail("float32 field has ", values.size(), " values but its shape holds ", f.elements());
  }
  f.data.resize(values.size_bytes());
  if (!values.empty()) std::memcpy(f.data.data(), values.data(), values.size_bytes());
  return f;
}

std::span<const int64_t> SampleField::int64_values() const {
  if (type != FieldType::kInt64) {
    fail("field of type ", field_type_name(type), " read as int64");
  }
  check(data.size() % sizeof(int64_t) == 0, "int64 field has ", data.size(),
        " bytes, not a multiple of 8");
  // The vector's storage is allocated by operator new, aligned for any fundamental type.
  return {reinterpret_cast<const int64_t*>(data.data()), data.size() / sizeof(int64_t)};
}

int64_t SampleSchema::total_dims() const {
  int64_t n = 0;
  for (const auto& f : fields) n += f.rank;
  return n;
}

uint64_t SampleSchema::fingerprint() const {
  uint64_t h = detail::mix64(fields.size());
  for (const auto& f : fields) {
    for (char c : f.name) h = detail::mix64(h ^ static_cast<uint8_t>(c));
    h = detail::mix64(h ^ (0x100u + static_cast<uint64_t>(f.type)));
    h = detail::mix64(h ^ (0x10000u + static_cast<uint64_t>(f.rank)));
  }
  return h;
}

SampleSchema make_schema(std::vector<FieldSpec> fields) {
  std::sort(fields.begin(), fields.end(),
            [](const FieldSpec& a, const FieldSpec& b) { return a.name < b.name; });
  bool has_input_ids = false;
  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldSpec& f = fields[i];
    if (f.name.empty()) throw InvalidArgument("a sample field has an empty name");
    if (i > 0 && fields[i - 1].name == f.name) {
      fail("sample field '", f.name, "' appears twice in the schema");
    }
    check(f.rank >= 0, "sample field '", f.name, "' has rank ", f.rank);
    info_of(f.type);  // rejects unknown type codes
    if (f.name == kInputIdsField) {
      if (f.type != FieldType::kInt64 || f.rank != 1) {
        fail("'", kInputIdsField, "' must be int64 of rank 1, got ", field_type_name(f.type),
             " of rank ", f.rank);
      }
      has_input_ids = true;
    }
  }
  if (!has_input_ids) {
    fail(std::string("the sample schema has no '"), kInputIdsField, "' field (int64, rank 1)");
  }
  return SampleSchema{std::move(fields)};
}

SampleSchema schema_of(const MultimodalSample& sample) {
  std::vector<FieldSpec> specs;
  specs.reserve(sample.fields.size());
  for (const auto& [name, field] : sample.fields) {
    specs.push_back(FieldSpec{name, field.type, static_cast<int>(field.shape.size())});
  }
  return make_schema(std::move(specs));
}

std::vector<int64_t> sample_dims(const MultimodalSample& sample, const SampleSchema& schema) {
  std::vector<int64_t> dims;
  dims.reserve(static_cast<size_t>(schema.total_dims()));
  for (const auto& spec : schema.fields) {
    const std::string label = field_label(sample.id, spec.name);
    const auto it = sample.fields.find(spec.name);
    if (it == sample.fields.end()) fail(label, " is missing");
    const SampleField& f = it->second;
    if (f.type != spec.type) {
      fail(label, " is ", field_type_name(f.type), " but the schema says ",
           field_type_name(spec.type));
    }
    check(static_cast<int>(f.shape.size()) == spec.rank, label, " has rank ", f.shape.size(),
          " but the schema says ", spec.rank);
    const int64_t bytes = checked_product(f.shape, label) * field_type_size(f.type);
    check(static_cast<int64_t>(f.data.size()) == bytes, label, " holds ", f.data.size(),
          " bytes but its shape needs ", bytes);
    dims.insert(dims.end(), f.shape.begin(), f.shape.end());
  }
  if (sample.fields.size() != schema.fields.size()) {
    for (const auto& entry : sample.fields) {
      const std::string& name = entry.first;
      const bool known = std::any_of(schema.fields.begin(), schema.fields.end(),
                                     [&](const FieldSpec& s) { return s.name == name; });
      if (!known) fail(field_label(sample.id, name), " is not in the schema");
    }
  }
  return dims;
}

int64_t serialized_size(const SampleSchema& schema, std::span<const int64_t> dims) {
  if (static_cast<int64_t>(dims.size()) != schema.total_dims()) {
    fail("sample dims have ", dims.size(), " values but the schema has ", schema.total_dims());
  }
  int64_t total = 0;
  size_t at = 0;
  for (const auto& spec : schema.fields) {
    const auto shape = dims.subspan(at, static_cast<size_t>(spec.rank));
    at += static_cast<size_t>(spec.rank);
    total += round_up_8(checked_product(shape, "field '" + spec.name + "'") *
                        field_type_size(spec.type));
  }
  return total;
}

void serialize_sample(const MultimodalSample& sample, const SampleSchema& schema,
                      std::span<std::byte> out) {
  const std::vector<int64_t> dims = sample_dims(sample, schema);
  check_size(out.size(), serialized_size(schema, dims), "serialize_sample:");
  size_t at = 0;
  for (const auto& spec : schema.fields) {
    const auto& data = sample.fields.at(spec.name).data;
    if (!data.empty()) std::memcpy(out.data() + at, data.data(), data.size());
    const auto padded = static_cast<size_t>(round_up_8(static_cast<int64_t>(data.size())));
    std::fill(out.begin() + static_cast<std::ptrdiff_t>(at + data.size()),
              out.begin() + static_cast<std::ptrdiff_t>(at + padded), std::byte{0});
    at += padded;
  }
}

MultimodalSample deserialize_sample(std::span<const std::byte> in, const SampleSchema& schema,
                                    int64_t id, std::span<const int64_t> dims) {
  check_size(in.size(), serialized_size(schema, dims), "deserialize_sample:");
  MultimodalSample sample;
  sample.id = id;
  size_t at = 0;
  size_t dim_at = 0;
  for (const auto& spec : schema.fields) {
    SampleField f;
    f.type = spec.type;
    f.shape.assign(dims.begin() + static_cast<std::ptrdiff_t>(dim_at),
                   dims.begin() + static_cast<std::ptrdiff_t>(dim_at + spec.rank));
    dim_at += static_cast<size_t>(spec.rank);
    const auto bytes = static_cast<size_t>(f.elements() * field_type_size(spec.type));
    f.data.assign(in.begin() + static_cast<std::ptrdiff_t>(at),
                  in.begin() + static_cast<std::ptrdiff_t>(at + bytes));
    at += static_cast<size_t>(round_up_8(static_cast<int64_t>(bytes)));
    sample.fields.emplace(spec.name, std::move(f));
  }
  return sample;
}

}  // namespace thdpack
