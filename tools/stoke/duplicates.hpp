// Byte-identical image files (stoke audit's exact duplicates, and stoke
// train's warning when its validation split shares files with its training
// split).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <vector>

#include "stoke/data.hpp"

namespace stoke_cli {

// The groups of byte-identical files among `files`: each group holds the
// indices of its files in increasing order (at least two), the groups ordered
// by their first index. Cheap for distinct files: only files of equal size are
// read and hashed (64-bit FNV-1a), and files with equal hashes are compared
// byte by byte, so a hash collision never makes a pair. A file that cannot be
// read is in no group (its reader reports it).
std::vector<std::vector<std::size_t>> identical_file_groups(
    std::span<const std::filesystem::path> files);

// stoke train: one line on stderr ("stoke COMMAND: warning: ...") naming how
// many validation images are byte-identical copies of training images and the
// first such pair; nothing when they share none or `val` is empty.
void warn_shared_duplicates(const char* command, const stoke::Dataset& train,
                            const stoke::Dataset& val);

}  // namespace stoke_cli
