// Encodings the model file and the reports share: base64, exact float text,
// comma lists, ISO time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/web_text.hpp"
#include "stoke/export.hpp"

namespace stoke::modelfile_detail {

using detail::base64_encode;  // core/web_text.hpp
// InvalidArgument naming `what` for characters outside the alphabet or a bad length.
STOKE_INTERNAL std::vector<std::uint8_t> base64_decode(std::string_view text,
                                                       std::string_view what);

// Shortest text that reads back to the same float ("%.9g").
STOKE_INTERNAL std::string float_text(double v);
STOKE_INTERNAL std::string join(std::span<const std::string> items, std::string_view separator);
STOKE_INTERNAL std::vector<std::string> split(std::string_view text, char separator);
// The current UTC time as "YYYY-MM-DDTHH:MM:SSZ".
STOKE_INTERNAL std::string utc_now();
using detail::html_escape;  // core/web_text.hpp

}  // namespace stoke::modelfile_detail
