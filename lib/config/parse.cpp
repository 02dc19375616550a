#include "config/parse.hpp"

#include <charconv>
#include <cmath>
#include <set>
#include <stdexcept>

#include "core/text.hpp"

namespace stoke::detail {

bool parse_bool(std::string_view text) {
  const auto v = to_lower(trim(text));
  if (v == "on" || v == "true" || v == "1" || v == "yes") return true;
  if (v == "off" || v == "false" || v == "0" || v == "no") return false;
  throw BadValue("not a switch");
}

Toggle parse_toggle(std::string_view text) {
  const auto v = to_lower(trim(text));
  if (v == "auto") return Toggle::kAuto;
  try {
    return parse_bool(v) ? Toggle::kOn : Toggle::kOff;
  } catch (const BadValue&) {
    throw BadValue("not auto/on/off");
  }
}

long long parse_integer(std::string_view text, long long min, long long max) {
  const auto v = trim(text);
  long long value = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    throw BadValue("not an integer");
  }
  if (value < min || value > max) {
    throw BadValue("out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return value;
}

namespace {

// Strict decimal: digits with an optional fraction, nothing else.
double parse_decimal(std::string_view v) {
  if (v.empty()) throw BadValue("empty");
  bool seen_digit = false, seen_dot = false;
  for (char c : v) {
    if (c >= '0' && c <= '9') {
      seen_digit = true;
    } else if (c == '.' && !seen_dot) {
      seen_dot = true;
    } else {
      throw BadValue("not a number");
    }
  }
  if (!seen_digit) throw BadValue("not a number");
  try {
    return std::stod(std::string(v));
  } catch (const std::out_of_range&) {  // hundreds of digits: beyond a double
    throw BadValue("out of range");
  }
}

}  // namespace

double parse_percent(std::string_view text) {
  auto v = trim(text);
  if (!v.empty() && v.back() == '%') v.remove_suffix(1);
  const double value = parse_decimal(trim(v));
  if (!(value > 0.0 && value <= 100.0)) throw BadValue("out of range (0, 100]");
  return value;
}

std::uint64_t parse_bytes(std::string_view text) {
  auto v = to_lower(trim(text));
  // Accept an optional "b" / "ib" after the unit: 512M, 512MB, 512MiB.
  std::string_view s = v;
  if (s.size() >= 2 && s.substr(s.size() - 2) == "ib") {
    s.remove_suffix(2);
  } else if (s.size() >= 2 && s.back() == 'b' &&
             std::string_view("kmgt").find(s[s.size() - 2]) != std::string_view::npos) {
    s.remove_suffix(1);
  }
  std::uint64_t scale = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k':
        scale = 1ull << 10;
        break;
      case 'm':
        scale = 1ull << 20;
        break;
      case 'g':
        scale = 1ull << 30;
        break;
      case 't':
        scale = 1ull << 40;
        break;
      default:
        break;
    }
    if (scale != 1) s.remove_suffix(1);
  }
  double number = 0;
  try {
    number = parse_decimal(trim(s));
  } catch (const BadValue&) {
    throw BadValue("not a size");
  }
  const double bytes = std::floor(number * static_cast<double>(scale));
  if (bytes < 1.0) throw BadValue("must be greater than zero");
  if (bytes > 1.8e19) throw BadValue("too large");
  return static_cast<std::uint64_t>(bytes);
}

DeviceRequest parse_device_request(std::string_view text) {
  const auto v = to_lower(trim(text));
  DeviceRequest request;
  if (v == "auto") return request;
  if (v == "cpu") {
    request.kind = DeviceRequest::Kind::kCpu;
    return request;
  }
  request.kind = DeviceRequest::Kind::kList;
  std::set<int> seen;
  std::string_view rest = v;
  while (true) {
    const auto comma = rest.find(',');
    const auto item = trim(rest.substr(0, comma));
    int index = 0;
    try {
      index = static_cast<int>(parse_integer(item, 0, 1023));
    } catch (const BadValue&) {
      throw BadValue("'" + std::string(item) + "' is not a device index");
    }
    if (!seen.insert(index).second) {
      throw BadValue("device " + std::to_string(index) + " is listed twice");
    }
    request.indices.push_back(index);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return request;
}

SimdRequest parse_simd(std::string_view text) {
  const auto v = to_lower(trim(text));
  SimdRequest request;
  if (v == "auto") return request;
  request.automatic = false;
  if (v == "scalar" || v == "off" || v == "none") {
    request.level = SimdLevel::kScalar;
  } else if (v == "sse4" || v == "sse4.1" || v == "sse4_1") {
    request.level = SimdLevel::kSse4;
  } else if (v == "avx2") {
    request.level = SimdLevel::kAvx2;
  } else if (v == "avx512") {
    request.level = SimdLevel::kAvx512;
  } else {
    throw BadValue("unknown instruction set");
  }
  return request;
}

Precision parse_precision(std::string_view text) {
  const auto v = to_lower(trim(text));
  if (v == "fp32") return Precision::kFp32;
  if (v == "bf16") return Precision::kBf16;
  if (v == "fp16") return Precision::kFp16;
  if (v == "auto") return Precision::kAuto;
  if (v == "int8") return Precision::kInt8;
  throw BadValue("unknown precision");
}

CacheSpec parse_cache(std::string_view text) {
  const auto v = trim(text);
  const auto lower = to_lower(v);
  CacheSpec spec;
  if (lower == "off" || lower == "none") return spec;
  if (lower == "ram") {
    spec.kind = CacheSpec::Kind::kRam;
    return spec;
  }
  if (lower.rfind("ram:", 0) == 0) {
    spec.kind = CacheSpec::Kind::kRam;
    spec.ram_budget = parse_bytes(v.substr(4));
    return spec;
  }
  if (lower.rfind("file:", 0) == 0) {
    spec.kind = CacheSpec::Kind::kFile;
    spec.path = std::string(trim(v.substr(5)));
    if (spec.path.empty()) throw BadValue("file: needs a path");
    return spec;
  }
  throw BadValue("unknown cache mode");
}

LogLevel parse_log_level(std::string_view text) {
  const auto v = to_lower(trim(text));
  if (v == "error") return LogLevel::kError;
  if (v == "warn" || v == "warning") return LogLevel::kWarn;
  if (v == "info") return LogLevel::kInfo;
  if (v == "debug") return LogLevel::kDebug;
  throw BadValue("unknown log level");
}

std::string format_size(std::uint64_t bytes) {
  static const char kUnits[] = {'T', 'G', 'M', 'K'};
  for (int i = 0; i < 4; ++i) {
    const std::uint64_t scale = 1ull << (10 * (4 - i));
    if (bytes >= scale && bytes % scale == 0) return std::to_string(bytes / scale) + kUnits[i];
  }
  return std::to_string(bytes);
}

std::string format_device_request(const DeviceRequest& request) {
  switch (request.kind) {
    case DeviceRequest::Kind::kAuto:
      return "auto";
    case DeviceRequest::Kind::kCpu:
      return "cpu";
    case DeviceRequest::Kind::kList:
      break;
  }
  std::string out;
  for (std::size_t i = 0; i < request.indices.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(request.indices[i]);
  }
  return out;
}

}  // namespace stoke::detail
