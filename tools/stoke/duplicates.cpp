// Byte-identical files; see duplicates.hpp.
#include "duplicates.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "core/image_hash.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke_cli {
namespace fs = std::filesystem;

namespace {

// Splits one bucket of equal-hash files into the groups of identical bytes.
void split_by_bytes(std::span<const fs::path> files, const std::vector<std::size_t>& bucket,
                    std::vector<std::vector<std::size_t>>& groups) {
  std::vector<std::vector<std::uint8_t>> firsts;  // the bytes of each group's first file
  std::vector<std::vector<std::size_t>> local;
  std::vector<std::uint8_t> bytes;
  for (const std::size_t i : bucket) {
    try {
      stoke::read_file(files[i], bytes);
    } catch (const stoke::Error&) {
      continue;
    }
    std::size_t g = 0;
    while (g < firsts.size() && firsts[g] != bytes) ++g;
    if (g == firsts.size()) {
      firsts.push_back(bytes);
      local.emplace_back();
    }
    local[g].push_back(i);
  }
  for (auto& group : local) {
    if (group.size() > 1) groups.push_back(std::move(group));
  }
}

}  // namespace

std::vector<std::vector<std::size_t>> identical_file_groups(std::span<const fs::path> files) {
  std::map<std::uintmax_t, std::vector<std::size_t>> by_size;
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    const auto size = fs::file_size(files[i], ec);
    if (!ec) by_size[size].push_back(i);
  }
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::uint8_t> bytes;
  for (const auto& [size, same_size] : by_size) {
    if (same_size.size() < 2) continue;
    std::map<std::uint64_t, std::vector<std::size_t>> by_hash;
    for (const std::size_t i : same_size) {
      try {
        stoke::read_file(files[i], bytes);
      } catch (const stoke::Error&) {
        continue;
      }
      by_hash[stoke::detail::content_hash(bytes)].push_back(i);
    }
    for (const auto& [hash, bucket] : by_hash) {
      if (bucket.size() > 1) split_by_bytes(files, bucket, groups);
    }
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

void warn_shared_duplicates(const char* command, const stoke::Dataset& train,
                            const stoke::Dataset& val) {
  if (val.empty() || train.in_memory() || val.in_memory()) return;
  std::vector<fs::path> files;
  files.reserve(train.size() + val.size());
  for (std::size_t i = 0; i < train.size(); ++i) files.emplace_back(train.file(i));
  for (std::size_t i = 0; i < val.size(); ++i) files.emplace_back(val.file(i));
  std::size_t shared = 0;
  std::string first;
  for (const auto& group : identical_file_groups(files)) {
    // Indices are sorted, so a group that holds a training file starts with one.
    if (group.front() >= train.size()) continue;
    for (const std::size_t i : group) {
      if (i < train.size()) continue;
      if (shared++ == 0) first = files[group.front()].string() + " = " + files[i].string();
    }
  }
  if (shared == 0) return;
  std::fprintf(stderr,
               "stoke %s: warning: %zu validation image%s byte-identical to training images "
               "(first: %s); the validation accuracy overstates (stoke audit lists them all)\n",
               command, shared, shared == 1 ? " is" : "s are", first.c_str());
}

}  // namespace stoke_cli
