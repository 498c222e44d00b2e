#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "data/json_text.hpp"
#include "thdpack/core/dataset.hpp"
#include "thdpack/core/errors.hpp"
#include "thdpack/data/mock_dataset.hpp"

namespace thdpack {
namespace {

using nlohmann::json;

const char* type_name(LengthDistributionType t) {
  switch (t) {
    case LengthDistributionType::kLognormal:
      return "lognormal";
    case LengthDistributionType::kUniform:
      return "uniform";
    case LengthDistributionType::kBimodal:
      return "bimodal";
  }
  return "?";
}

// "mock dataset config", naming the file it came from when there is one.
std::string config_name(const std::string& source) {
  return source.empty() ? "mock dataset config" : "mock dataset config '" + source + "'";
}

class ConfigReader {
 public:
  ConfigReader(const json& object, std::string name) : object_(object), name_(std::move(name)) {}

  std::string text(const char* key) {
    const json& v = take(key);
    if (!v.is_string()) fail(key, "a string");
    return v.get<std::string>();
  }

  int64_t integer(const char* key) {
    const json& v = take(key);
    if (!v.is_number_integer()) fail(key, "an integer");
    // Past int64 the value would wrap (2^64-1 into -1).
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(key, "an integer that fits int64");
    }
    return v.get<int64_t>();
  }

  double number(const char* key) {
    const json& v = take(key);
    if (!v.is_number()) fail(key, "a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(key, "a finite number");
    return d;
  }

  bool has(const char* key) const { return object_.contains(key); }

  // Every key of the object must have been read.
  void reject_unknown(const std::string& allowed) const {
    for (const auto& [key, value] : object_.items()) {
      if (!used_.count(key)) {
        thdpack::fail(name_, ": unknown key '", detail::excerpt(key),
                      "' for this mode/type; allowed keys: ", allowed);
      }
    }
  }

 private:
  const json& take(const char* key) {
    if (!object_.contains(key)) {
      thdpack::fail(name_, ": missing key '", key, "'");
    }
    used_.insert(key);
    return object_.at(key);
  }

  [[noreturn]] void fail(const char* key, const char* expected) const {
    thdpack::fail(name_, ": '", key, "' must be ", expected, ", got ",
                  detail::json_excerpt(object_.at(key)));
  }

  const json& object_;
  std::string name_;
  std::set<std::string> used_;
};

void require(bool ok, const std::string& message) {
  if (!ok) fail("mock dataset config: ", message);
}

}  // namespace

namespace {

bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xF]);
  }
  return out;
}

std::string from_hex(const std::string& hex, const std::string& where) {
  const auto digit = [&](char ch) -> int {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    fail(where, ": 'path_hex' must be hexadecimal digits (0-9, a-f)");
  };
  if (hex.size() % 2 != 0) fail(where, ": 'path_hex' has an odd length");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    out.push_back(static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1])));
  }
  return out;
}

}  // namespace

MockConfig default_mock_config(int64_t seq_length) {
  // Below 4 the mean S//4*3 is 0, which no lognormal has.
  check(seq_length >= 4, "sequence length for the default mock config must be >= 4, got ",
        seq_length);
  MockConfig c;
  c.mode = MockConfig::Mode::kDistribution;
  c.type = LengthDistributionType::kLognormal;
  c.min_seq_len = seq_length / 2;
  c.max_seq_len = seq_length;
  c.mean_seq_len = static_cast<double>(seq_length / 4 * 3);
  c.lognormal_sigma = 1.1;
  return c;
}

MockConfig parse_mock_config(const std::string& json_text, const std::string& base_dir,
                             const std::string& source) {
  const std::string name = config_name(source);
  const json root = detail::parse_json_strictly(json_text, name);
  if (!root.is_object()) fail(name, " must be a JSON object");

  ConfigReader r(root, name);
  const auto ensure = [&](bool ok, const std::string& message) {
    if (!ok) fail(name, ": ", message);
  };
  MockConfig c;
  const std::string mode = r.has("mode") ? r.text("mode") : "distribution";
  if (mode == "file") {
    c.mode = MockConfig::Mode::kFile;
    // "path_hex": how to_json records a path that is not UTF-8 (JSON text is UTF-8 only).
    c.path = r.has("path_hex") ? from_hex(r.text("path_hex"), name) : r.text("path");
    if (!base_dir.empty() && std::filesystem::path(c.path).is_relative()) {
      c.path = (std::filesystem::path(base_dir) / c.path).string();
    }
    r.reject_unknown("mode, path");
    return c;
  }
  ensure(mode == "distribution",
         "'mode' must be \"distribution\" or \"file\", got \"" + detail::excerpt(mode) + "\"");

  const std::string type = r.has("type") ? r.text("type") : "lognormal";
  if (r.has("size")) c.size = r.integer("size");
  if (r.has("seed")) {
    const int64_t seed = r.integer("seed");
    ensure(seed >= 0, "'seed' must be >= 0");
    c.seed = static_cast<uint64_t>(seed);
  }

  if (type == "lognormal") {
    c.type = LengthDistributionType::kLognormal;
    c.min_seq_len = r.integer("min_seq_len");
    c.max_seq_len = r.integer("max_seq_len");
    c.mean_seq_len = r.number("mean_seq_len");
    c.lognormal_sigma = r.number("lognormal_sigma");
    r.reject_unknown(
        "mode, type, min_seq_len, max_seq_len, mean_seq_len, lognormal_sigma, size, seed");
  } else if (type == "uniform") {
    c.type = LengthDistributionType::kUniform;
    c.min_seq_len = r.integer("min_seq_len");
    c.max_seq_len = r.integer("max_seq_len");
    r.reject_unknown("mode, type, min_seq_len, max_seq_len, size, seed");
  } else if (type == "bimodal") {
    c.type = LengthDistributionType::kBimodal;
    c.short_min = r.integer("short_min");
    c.short_max = r.integer("short_max");
    c.long_min = r.integer("long_min");
    c.long_max = r.integer("long_max");
    c.long_fraction = r.number("long_fraction");
    c.min_seq_len = std::min(c.short_min, c.long_min);
    c.max_seq_len = std::max(c.short_max, c.long_max);
    r.reject_unknown(
        "mode, type, short_min, short_max, long_min, long_max, long_fraction, size, seed");
  } else {
    fail(name, ": unknown distribution type \"", detail::excerpt(type),
         "\"; use lognormal, uniform or bimodal");
  }
  try {
    validate(c);
  } catch (const InvalidArgument& e) {
    if (source.empty()) throw;
    const std::string generic = config_name("") + ": ";
    const std::string what = e.what();
    fail(name, ": ", (what.starts_with(generic) ? what.substr(generic.size()) : what));
  }
  return c;
}

void validate(const MockConfig& c) {
  if (c.mode == MockConfig::Mode::kFile) {
    require(!c.path.empty(), "file mode needs a 'path'");
    return;
  }
  require(c.size >= 1, message("'size' must be >= 1, got ", c.size));
  switch (c.type) {
    case LengthDistributionType::kLognormal:
      require(std::isfinite(c.mean_seq_len) && c.mean_seq_len > 0,
              "'mean_seq_len' must be > 0 and finite");
      // mu = ln(mean) - sigma^2/2 and sigma*z must stay finite: with sigma^2 overflowing, a draw
      // of -inf + inf is NaN, which has no length.
      require(c.lognormal_sigma >= 0 && c.lognormal_sigma <= 1e150,
              "'lognormal_sigma' must be in [0, 1e150], got " + json(c.lognormal_sigma).dump());
      [[fallthrough]];
    case LengthDistributionType::kUniform:
      require(c.min_seq_len >= 1, message("'min_seq_len' must be >= 1, got ", c.min_seq_len));
      require(c.max_seq_len >= c.min_seq_len,
              message("'max_seq_len' (", c.max_seq_len, ") must be >= 'min_seq_len' (",
                      c.min_seq_len, ")"));
      break;
    case LengthDistributionType::kBimodal:
      require(c.short_min >= 1 && c.short_max >= c.short_min, "need 1 <= short_min <= short_max");
      require(c.long_min >= 1 && c.long_max >= c.long_min, "need 1 <= long_min <= long_max");
      require(c.long_fraction >= 0 && c.long_fraction <= 1, "'long_fraction' must be in [0, 1]");
      break;
  }
}

std::string to_json(const MockConfig& c) {
  json j;
  if (c.mode == MockConfig::Mode::kFile) {
    j["mode"] = "file";
    if (valid_utf8(c.path)) {
      j["path"] = c.path;
    } else {
      j["path_hex"] = to_hex(c.path);  // a folder named in Latin-1, say: bytes JSON cannot hold
    }
    return j.dump();
  }
  j["mode"] = "distribution";
  j["type"] = type_name(c.type);
  switch (c.type) {
    case LengthDistributionType::kLognormal:
      j["mean_seq_len"] = c.mean_seq_len;
      j["lognormal_sigma"] = c.lognormal_sigma;
      [[fallthrough]];
    case LengthDistributionType::kUniform:
      j["min_seq_len"] = c.min_seq_len;
      j["max_seq_len"] = c.max_seq_len;
      break;
    case LengthDistributionType::kBimodal:
      j["short_min"] = c.short_min;
      j["short_max"] = c.short_max;
      j["long_min"] = c.long_min;
      j["long_max"] = c.long_max;
      j["long_fraction"] = c.long_fraction;
      break;
  }
  j["size"] = c.size;
  j["seed"] = c.seed;
  return j.dump();
}

}  // namespace thdpack
