// What a Dataset shares between its copies and subsets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoke/data.hpp"

namespace stoke {

struct Dataset::Storage {
  std::vector<std::string> classes;
  std::vector<std::string> paths;        // file-backed samples
  std::vector<std::int32_t> labels;
  std::vector<Split> splits;
  std::vector<std::uint64_t> identity;   // per sample, for fingerprint()
  std::vector<std::uint8_t> pixels;      // in-memory samples (IDX), row-major per image
  int pixel_width = 0;
  int pixel_height = 0;
  DatasetReport report;
};

}  // namespace stoke
