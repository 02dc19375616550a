// Reading a file that is input to stoke (a model file, an ONNX or safetensors
// file) with the checks images get: it must be a regular file (a directory,
// device, FIFO or socket is refused, and opening a FIFO never blocks), and a
// reader reads only what the file's size and its header vouch for, so that
// /dev/zero or a huge sparse file is never read whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace stoke::detail {

class RegularFile {
 public:
  // IoError naming `what` and the path when it cannot be opened or is not a
  // regular file.
  RegularFile(const std::filesystem::path& path, const std::string& what);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  std::uint64_t size() const noexcept { return size_; }
  // Exactly `bytes` bytes at `offset` into `out`; IoError on a read error or
  // a file that shrank.
  void read_at(std::uint64_t offset, void* out, std::size_t bytes) const;

 private:
  std::string name_;  // "what 'path'"
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace stoke::detail
