// Value parsers for the knob table. Each throws BadValue with the reason; the
// caller wraps it into a ConfigError naming the knob, the value and the origin.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "stoke/config.hpp"

namespace stoke::detail {

struct BadValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool parse_bool(std::string_view text);
Toggle parse_toggle(std::string_view text);
long long parse_integer(std::string_view text, long long min, long long max);
double parse_percent(std::string_view text);
std::uint64_t parse_bytes(std::string_view text);  // > 0
DeviceRequest parse_device_request(std::string_view text);
SimdRequest parse_simd(std::string_view text);
CacheSpec parse_cache(std::string_view text);
LogLevel parse_log_level(std::string_view text);
Precision parse_precision(std::string_view text);

std::string format_size(std::uint64_t bytes);  // "512M" when exact, else bytes
std::string format_device_request(const DeviceRequest& request);

}  // namespace stoke::detail
