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
#include "stoke/context.hpp"
#include "stoke/backend.hpp"
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
  std::size_t conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                     const Conv2dParams& params) const override;
  void release_workspace() override;

  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override;
  void fill(Tensor& tensor, float value) override;
  void synchronize() override {}
  bool supports(Op op, DType dtype) const noexcept override;

  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                      const Conv2dParams& params) override;
  void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                       Tensor& dw, Tensor& db, const Conv2dParams& params) override;
  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   Tensor& y, Tensor& running_mean, Tensor& running_var,
                                   Tensor& save_mean, Tensor& save_invstd,
                                   const BatchNormParams& params) override;
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    Tensor& y, const BatchNormParams& params) override;
  void batch_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma,
                           const Tensor& save_mean, const Tensor& save_invstd, Tensor& dx,
                           Tensor& dgamma, Tensor& dbeta) override;
  void relu_forward(const Tensor& x, Tensor& y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) override;
  void max_pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx,
                           const Pool2dParams& params) override;
  void avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) override;
  void avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& params) override;
  void global_avg_pool_forward(const Tensor& x, Tensor& y) override;
  void global_avg_pool_backward(const Tensor& dy, Tensor& dx) override;
  void add(const Tensor& a, const Tensor& b, Tensor& y) override;
  void accumulate(Tensor& dx, const Tensor& dy) override;
  void scale(Tensor& x, float alpha) override;
  void linear_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override;
  void linear_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                       Tensor& dw, Tensor& db) override;
  void softmax_cross_entropy_forward(const Tensor& logits, const Tensor& labels, Tensor& probs,
                                     Tensor& loss, Tensor& correct) override;
  void softmax_cross_entropy_backward(const Tensor& probs, const Tensor& labels,
                                      Tensor& dlogits) override;
  void dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p,
                       std::uint64_t seed) override;
  void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) override;
  void sgd_update(Tensor& params, const Tensor& grads, Tensor& velocity,
                  const SgdParams& p) override;
  void adam_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                   const AdamParams& p) override;

  // Tests compare kSerial with kParallel; both use the same chunking.
  void set_execution(Execution execution) noexcept { execution_ = execution; }
  Execution execution() const noexcept { return execution_; }
  // Number of independent chunks parallel ops split into (>= 1).
  int chunks() const noexcept;
  // The elementwise kernel table this backend was built with.
  const SimdKernels& simd_kernels() const noexcept { return *simd_; }
  const Context& context() const noexcept { return context_; }
  // Workspace of at least `floats` floats, kept between calls and grown on
  // demand through the counting allocator. Valid until the next workspace() call.
  float* workspace(std::size_t floats);

 private:
  CountingAllocator allocator_;
  Context context_;
  const SimdKernels* simd_;
  Execution execution_ = Execution::kParallel;
  float* workspace_ = nullptr;
  std::size_t workspace_floats_ = 0;
};

// Helpers shared by the op files.
// InvalidArgument naming op and tensor unless t is a defined float32 tensor of `shape`.
STOKE_INTERNAL void expect_shape(const char* op, const char* name, const Tensor& t,
                                 const Shape& shape);
// Runs body(chunk, begin, end) for `chunks` even splits of [0, n) with the
// backend's execution mode; chunk c always gets the same range.
STOKE_INTERNAL void for_chunks(const CpuBackend& be, std::size_t n, int chunks,
                               const std::function<void(int, std::size_t, std::size_t)>& body);

}  // namespace stoke::cpu
