// Reading a whole file that must be a regular file: shared by read_file and
// the loader (which keeps paths as strings to avoid a path per image).
#pragma once

#include <cstdint>
#include <vector>

#include "stoke/export.hpp"

namespace stoke::detail {

// Reads `path` into `out` (resized, reused). IoError naming the path when it
// cannot be opened or read, or when it is a directory or a special file
// (checked with fstat on a non-blocking open, so a FIFO or device never blocks
// and /dev/zero is not read).
STOKE_INTERNAL void read_regular_file(const char* path, std::vector<std::uint8_t>& out);

}  // namespace stoke::detail
