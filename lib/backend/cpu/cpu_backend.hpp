// The CPU backend: oneTBB-parallel ops through stoke::parallel_for, xsimd
// elementwise kernels, convolution as im2col + single-threaded sgemm per
// task. Work runs at once on the calling thread (the "stream" is trivially
// in order), so synchronize() has nothing to wait for.
//
// Parallel work is split into a fixed number of chunks (one per arena
// thread), each with its own slice of the workspace and its own partial sums
// reduced in chunk order; results therefore do not depend on scheduling, and
// Execution::kSerial gives bit-identical results to kParallel.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/cpu/counting_allocator.hpp"
#include "backend/cpu/simd.hpp"
#include "stoke/backend.hpp"
#include "stoke/context.hpp"
#include "stoke/program.hpp"
#include "stoke/threads.hpp"

namespace stoke::cpu {

class STOKE_INTERNAL CpuBackend final : public Backend {
 public:
  // The default context: elementwise kernels for the best SIMD level this
  // CPU has; ops run in the arena current on the calling thread.
  CpuBackend() : CpuBackend(0) {}
  explicit CpuBackend(std::uint64_t memory_cap) : CpuBackend(memory_cap, Context()) {}
  // A context's backend (make_backend): its SIMD level, and its arena for
  // every op whatever thread calls.
  CpuBackend(std::uint64_t memory_cap, const Context& context);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  bool is_host() const noexcept override { return true; }

  void* allocate(std::size_t bytes) override { return allocator_.allocate(bytes); }
  void free(void* ptr, std::size_t bytes) noexcept override { allocator_.free(ptr, bytes); }
  MemoryStats memory_stats() const override { return allocator_.stats(); }
  void reset_peak() override { allocator_.reset_peak(); }
  // Allocations served so far, freed ones included (the counting allocator's).
  std::uint64_t total_allocations() const noexcept { return allocator_.total_allocations(); }
  std::size_t conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                     const Conv2dParams& params) const override;
  void release_workspace() override;

  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override;
  void fill(Tensor& tensor, float value) override;
  void synchronize() override {}

  // With oneDNN: activations in its blocked layout between steps
  // (program_blocked.cpp); without it, or for kPlain: the plain program.
  // bf16: the blocked program in bf16, where oneDNN has bf16 kernels.
  std::unique_ptr<InferenceProgram> compile_inference(std::vector<InferenceStep> steps,
                                                      ProgramLayout layout,
                                                      Precision precision) override;
  PrecisionSupport inference_precision(Precision precision) const noexcept override;
  // bf16 training convolutions through oneDNN (conv2d_dnnl.hpp): as inference.
  PrecisionSupport training_precision_support(Precision precision) const noexcept override;
  void set_training_precision(Precision precision) override;
  Precision training_precision() const noexcept override { return training_precision_; }
  // The registry's backend (built before init()) takes init()'s SIMD level:
  // its kernel table and oneDNN's cap (dnnl_isa.hpp). Before any op runs.
  void adopt_simd(const Context& context);
  // Same context, its own workspace.
  std::unique_ptr<Backend> make_worker() const override;
  void set_parallel(bool parallel) noexcept override {
    execution_ = parallel ? Execution::kParallel : Execution::kSerial;
  }

  // The ops (STOKE_OPS), unchecked: Backend's front doors validate the
  // arguments first. Public here (private in Backend) so that a backend
  // computing on a CpuBackend (the fake GPU in tests) calls them directly.
  STOKE_BACKEND_OP_OVERRIDES

  // Tests compare kSerial with kParallel; both use the same chunking.
  void set_execution(Execution execution) noexcept { execution_ = execution; }
  Execution execution() const noexcept { return execution_; }
  // Number of independent chunks parallel ops split into (>= 1).
  int chunks() const noexcept;
  // The elementwise kernel table this backend was built with.
  const SimdKernels& simd_kernels() const noexcept { return *simd_; }
  const Context& context() const noexcept { return context_; }
  // Convolutions through oneDNN (built in, and not turned off below), else
  // the im2col + sgemm path (conv2d_gemm.hpp) and the plain inference program.
  bool dnnl_convolutions() const noexcept;
  // Runs this backend as a build without oneDNN would: the op suite's
  // "cpu_gemm" instance, so the fallback path is tested where oneDNN exists.
  void use_gemm_convolutions(bool on) noexcept { gemm_convolutions_ = on; }
  // Workspace of at least `floats` floats, kept between calls and grown on
  // demand through the counting allocator. Valid until the next workspace() call.
  float* workspace(std::size_t floats);

 private:
  CountingAllocator allocator_;
  Context context_;
  const SimdKernels* simd_;
  Execution execution_ = Execution::kParallel;
  bool gemm_convolutions_ = false;
  Precision training_precision_ = Precision::kFp32;
  float* workspace_ = nullptr;
  std::size_t workspace_floats_ = 0;
};

// Helpers shared by the op files.
// Runs body(chunk, begin, end) for `chunks` even splits of [0, n) with the
// backend's execution mode; chunk c always gets the same range.
STOKE_INTERNAL void for_chunks(const CpuBackend& be, std::size_t n, int chunks,
                               const std::function<void(int, std::size_t, std::size_t)>& body);

}  // namespace stoke::cpu
