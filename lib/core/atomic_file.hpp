// Crash-safe file replacement: write a temporary file beside the target, flush
// it to disk, rename it over the target, then flush the directory. A crash at
// any moment leaves the old file or the new one, never a broken one.
#pragma once

#include <filesystem>
#include <string_view>

namespace stoke::detail {

// IoError naming the path and the failing step.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace stoke::detail
