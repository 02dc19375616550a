#pragma once

#include "stoke/export.hpp"

namespace stoke {

// The library's version, "MAJOR.MINOR.PATCH", as built.
STOKE_API const char* version() noexcept;

}  // namespace stoke
