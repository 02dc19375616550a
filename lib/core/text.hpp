// Small text helpers shared by the modules: JSON escaping, trimming, case.
#pragma once

#include <string>
#include <string_view>

#include "stoke/export.hpp"

namespace stoke::detail {

// `s` as a JSON string literal, quotes included, always valid UTF-8: a byte
// that is not part of well-formed UTF-8 (a Latin-1 file name) becomes \u00XX.
STOKE_INTERNAL std::string json_quote(std::string_view s);

STOKE_INTERNAL std::string_view trim(std::string_view s);
STOKE_INTERNAL std::string to_lower(std::string_view s);

// Levenshtein distance, for "did you mean" suggestions.
STOKE_INTERNAL std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace stoke::detail
