#include "backend/cpu/blas.hpp"

#include <cblas.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdint>
#include <string>

#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {
// One OpenBLAS thread: parallelism comes from the oneTBB arena, each task
// calling sgemm on its own thread (the pthread build locks its buffer
// allocator, so concurrent calls are safe).
const bool kOneBlasThread = [] {
  openblas_set_num_threads(1);
  return true;
}();

// OpenBLAS maps a 128 MiB work buffer (BUFFER_SIZE on x86-64) for each thread
// that calls it at once, and when that mmap fails it retries forever: under
// an address-space limit (ulimit -v, RLIMIT_DATA) sgemm would hang instead
// of failing. So while such a limit is set, each call first proves that
// twice that much address space is still free, and is an OutOfMemory
// otherwise. Without a limit nothing is probed (the mapping then fails only
// when memory itself is gone, where the kernel's OOM handling applies).
constexpr std::size_t kBlasBufferProbe = std::size_t{2} * (128u << 20);

bool address_space_limited() {
  static const bool limited = [] {
    rlimit as{}, data{};
    const bool as_set = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
    const bool data_set = getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY;
    return as_set || data_set;
  }();
  return limited;
}

void check_blas_headroom(int m, int n, int k) {
  if (!address_space_limited()) return;
  // Reserved, never touched: counts against the limits, costs no memory.
  void* p = mmap(nullptr, kBlasBufferProbe, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw OutOfMemory("out of memory: a " + std::to_string(m) + "x" + std::to_string(k) +
                          " by " + std::to_string(k) + "x" + std::to_string(n) +
                          " matrix product needs BLAS work space (" +
                          std::to_string(kBlasBufferProbe >> 20) +
                          " MiB of address space) that the process's address-space limit "
                          "(ulimit -v / RLIMIT_AS, RLIMIT_DATA) no longer leaves; raise the "
                          "limit or use a smaller batch or input size",
                      kBlasBufferProbe, 0, 0);
  }
  munmap(p, kBlasBufferProbe);
}
}  // namespace

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  (void)kOneBlasThread;
  check_blas_headroom(m, n, k);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace stoke::cpu
