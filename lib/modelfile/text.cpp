// Base64 decoding, float text, lists and time for lib/deploy (base64 encoding
// and HTML escaping: core/web_text.cpp).
#include "modelfile/text.hpp"

#include <cstdio>
#include <ctime>

#include "stoke/error.hpp"

namespace stoke::modelfile_detail {

namespace {
int digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::vector<std::uint8_t> base64_decode(std::string_view text, std::string_view what) {
  if (text.size() % 4 != 0) {
    throw InvalidArgument(std::string(what) + ": base64 length " + std::to_string(text.size()) +
                          " is not a multiple of 4");
  }
  std::vector<std::uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int d[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      const bool last_group = i + 4 == text.size();
      if (c == '=' && last_group && k >= 2) {
        d[k] = 0;
        ++pad;
        continue;
      }
      d[k] = digit(c);
      if (d[k] < 0 || pad)
        throw InvalidArgument(std::string(what) + ": not base64 at offset " +
                              std::to_string(i + k));
    }
    const std::uint32_t v = (std::uint32_t(d[0]) << 18) | (std::uint32_t(d[1]) << 12) |
                            (std::uint32_t(d[2]) << 6) | std::uint32_t(d[3]);
    out.push_back(static_cast<std::uint8_t>(v >> 16));
    if (pad < 2) out.push_back(static_cast<std::uint8_t>(v >> 8));
    if (pad < 1) out.push_back(static_cast<std::uint8_t>(v));
  }
  return out;
}

std::string float_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string join(std::span<const std::string> items, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    out += items[i];
  }
  return out;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(separator, start);
    out.emplace_back(
        text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace stoke::modelfile_detail
