// Text for self-contained HTML pages: escaping and base64 (for data: URIs).
// Stateless, shared by the reports (lib/deploy) and the `stoke` command
// (through stoke_tool_text).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "stoke/export.hpp"

namespace stoke::detail {

// HTML text escaping (&, <, >, ", ').
STOKE_INTERNAL std::string html_escape(std::string_view text);
// Standard base64 (RFC 4648 alphabet, '=' padding).
STOKE_INTERNAL std::string base64_encode(std::span<const std::uint8_t> bytes);

}  // namespace stoke::detail
