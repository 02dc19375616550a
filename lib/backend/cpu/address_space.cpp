#include "backend/cpu/address_space.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <string>

#include "stoke/error.hpp"

namespace stoke::cpu {

bool address_space_limited() noexcept {
  static const bool limited = [] {
    rlimit as{}, data{};
    const bool as_set = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
    const bool data_set = getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY;
    return as_set || data_set;
  }();
  return limited;
}

void require_address_space(std::size_t bytes, std::string_view what) {
  if (!address_space_limited()) return;
  // Writable and private so that RLIMIT_DATA counts it as the libraries'
  // own mappings are; MAP_NORESERVE and never touched: no memory is used.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw OutOfMemory("out of memory: " + std::string(what) + " needs " +
                          std::to_string(bytes >> 20) +
                          " MiB of address space that the process's limit (ulimit -v / "
                          "RLIMIT_AS, RLIMIT_DATA) no longer leaves; raise the limit or use a "
                          "smaller batch or input size",
                      bytes, 0, 0);
  }
  munmap(p, bytes);
}

}  // namespace stoke::cpu
