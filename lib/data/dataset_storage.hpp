// What a Dataset shares between its copies and subsets.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/error.hpp"

namespace stoke {

struct Dataset::Storage {
  std::vector<std::string> classes;
  std::vector<std::string> paths;        // file-backed samples
  std::vector<std::uint8_t> bit_depths;  // file-backed: 8 or 16 per sample (from the header)
  std::vector<std::int32_t> labels;
  std::vector<Split> splits;
  std::vector<std::uint64_t> identity;  // per sample, for fingerprint()
  std::vector<std::uint8_t> pixels;     // in-memory samples, row-major per image (16-bit: native
                                        // uint16 at even offsets)
  int pixel_width = 0;                  // IDX: every image's size (gray)
  int pixel_height = 0;
  struct Slot {  // application buffers: per image
    std::size_t offset;
    int width, height, channels, bit_depth;
  };
  std::vector<Slot> slots;
  DatasetReport report;
  bool skip_corrupt = false;  // DatasetOptions::skip_corrupt at load
};

namespace data_detail {

// Runs a dataset source and turns every foreign exception into a stoke::Error
// naming `what` (the folder, manifest or file), so none escapes a constructor.
template <class F>
auto guarded(const std::string& what, F&& body) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::filesystem::filesystem_error& e) {
    throw IoError(what + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(what + ": out of host memory while loading the dataset", 0, 0, 0);
  } catch (const std::exception& e) {
    throw Error(ErrorCode::kInternal, what + ": " + e.what());
  }
}

}  // namespace data_detail

}  // namespace stoke
