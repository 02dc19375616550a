#include "core/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "stoke/error.hpp"

namespace stoke::detail {

RegularFile::RegularFile(const std::filesystem::path& path, const std::string& what)
    : name_(what + " '" + path.string() + "'") {
  // O_NONBLOCK: open() on a FIFO without a writer would wait forever.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw IoError("cannot open " + name_ + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int saved = errno;
    ::close(fd_);
    throw IoError("cannot stat " + name_ + ": " + std::strerror(saved));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw IoError("cannot read " + name_ + ": " +
                  (S_ISDIR(st.st_mode) ? "it is a directory"
                                       : "not a regular file (a device, FIFO or socket)"));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RegularFile::read_at(std::uint64_t offset, void* out, std::size_t bytes) const {
  auto* p = static_cast<char*>(out);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::pread(fd_, p + got, bytes - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError("cannot read " + name_ + ": " + std::strerror(errno));
    if (n == 0) throw IoError("cannot read " + name_ + ": short read (the file shrank)");
    got += static_cast<std::size_t>(n);
  }
}

}  // namespace stoke::detail
