// The custom kernels for one device, JIT-compiled for its architecture
// (STOKE_GPU_JIT on/auto) or precompiled (off), and the one helper every
// kernel launch goes through.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/jit.hpp"

namespace stoke::cuda {

enum class KernelOrigin { kJit, kPrecompiled };

class STOKE_INTERNAL KernelSet {
 public:
  // Loads every kernel for `device` (the current device is set to it).
  // With use_jit, compiles through `cache` for the device's sm_XY; a JIT
  // failure falls back to the precompiled kernels with one warning.
  KernelSet(int device, bool use_jit, const JitCache& cache);
  ~KernelSet();
  KernelSet(const KernelSet&) = delete;
  KernelSet& operator=(const KernelSet&) = delete;

  // The function to pass to cudaLaunchKernel; Unsupported if unknown.
  const void* function(const std::string& name) const;
  KernelOrigin origin() const { return origin_; }
  int arch() const { return arch_; }
  int compiled_count() const { return compiled_; }  // cache misses this load

 private:
  std::unordered_map<std::string, const void*> functions_;
  std::vector<cudaLibrary_t> libraries_;
  KernelOrigin origin_ = KernelOrigin::kPrecompiled;
  int arch_ = 0;
  int compiled_ = 0;
};

// Grid for a grid-stride kernel over n elements: enough blocks to fill the
// device, never more than needed.
STOKE_INTERNAL dim3 grid_for(long long n, int block = 256);

// Launches `function` and checks the launch; `args` as for cudaLaunchKernel.
STOKE_INTERNAL void launch(const void* function, dim3 grid, dim3 block, void** args,
                           cudaStream_t stream, const char* name, std::size_t shared_bytes = 0);

}  // namespace stoke::cuda
