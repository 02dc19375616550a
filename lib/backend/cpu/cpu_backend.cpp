// CpuBackend: memory, copies, workspace and the chunking helper. The ops live
// one family per file (conv2d.cpp, batch_norm.cpp, ...).
#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstring>

#include "backend/cpu/dnnl_isa.hpp"
#include "backend/cpu/simd.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

CpuBackend::CpuBackend(std::uint64_t memory_cap, const Context& context)
    : allocator_(memory_cap), context_(context), simd_(&cpu::simd_kernels(context.simd())) {
  cap_library_isa(context);
}

void CpuBackend::adopt_simd(const Context& context) {
  simd_ = &cpu::simd_kernels(context.simd());
  cap_library_isa(context);
}

CpuBackend::~CpuBackend() {
  release_workspace();
}

void CpuBackend::release_workspace() {
  if (workspace_) allocator_.free(workspace_, workspace_floats_ * sizeof(float));
  workspace_ = nullptr;
  workspace_floats_ = 0;
}

float* CpuBackend::workspace(std::size_t floats) {
  if (floats > workspace_floats_) {
    release_workspace();
    workspace_ = static_cast<float*>(allocator_.allocate(floats * sizeof(float)));
    workspace_floats_ = floats;
  }
  return workspace_;
}

int CpuBackend::chunks() const noexcept {
  return std::max(1, context_.cpu_threads());
}

void CpuBackend::copy(void* dst, const void* src, std::size_t bytes, CopyKind /*kind*/) {
  if (bytes == 0) return;
  if (!dst || !src) throw InvalidArgument("cpu backend copy: null pointer");
  std::memmove(dst, src, bytes);
}

void CpuBackend::fill(Tensor& tensor, float value) {
  float* p = tensor.data<float>();
  std::fill(p, p + tensor.numel(), value);
}

void for_chunks(const CpuBackend& be, std::size_t n, int chunks,
                const std::function<void(int, std::size_t, std::size_t)>& body) {
  if (n == 0) return;
  const std::size_t c = std::min<std::size_t>(static_cast<std::size_t>(std::max(chunks, 1)), n);
  be.context().run([&] {
    parallel_for(
        0, c, 1,
        [&](std::size_t b, std::size_t e) {
          for (std::size_t k = b; k < e; ++k) {
            body(static_cast<int>(k), k * n / c, (k + 1) * n / c);
          }
        },
        be.execution());
  });
}

}  // namespace stoke::cpu
