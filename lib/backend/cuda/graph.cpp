// CUDA-graph capture of a step on the backend's stream. Capture uses the
// thread-local mode, so other threads (the prefetcher's copy stream) keep
// working; anything in the step that cannot be captured (a pool that must
// cudaMalloc, a synchronization, a cudnnFind) makes the capture fail, and the
// caller falls back to eager execution.
#include <cstring>

#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::cuda {

class CudaCapturedStep final : public CapturedStep {
 public:
  CudaCapturedStep(CudaBackend& backend, cudaGraph_t graph, cudaGraphExec_t exec,
                   std::vector<void*> held)
      : backend_(backend), graph_(graph), exec_(exec), held_(std::move(held)) {
    ++backend_.live_graphs_;  // keeps the workspace blocks it points into
  }
  ~CudaCapturedStep() override {
    // Replays still queued may use the held memory: it goes back to the
    // pool in stream order.
    STOKE_CUDA_WARN(cudaGraphExecDestroy(exec_));
    STOKE_CUDA_WARN(cudaGraphDestroy(graph_));
    for (void* p : held_) backend_.free(p, 0);
    backend_.graph_destroyed();
  }
  void replay() override {
    backend_.make_current();
    STOKE_CUDA_CHECK(cudaGraphLaunch(exec_, backend_.stream()));
  }
  std::size_t nodes() const override {
    std::size_t count = 0;
    STOKE_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &count));
    return count;
  }

 private:
  CudaBackend& backend_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  std::vector<void*> held_;
};

std::unique_ptr<CapturedStep> CudaBackend::capture(const std::function<void()>& step,
                                                   std::string* why) {
  const auto fail = [&](const std::string& reason) -> std::unique_ptr<CapturedStep> {
    if (why) *why = reason;
    return nullptr;
  };
  if (capturing_) return fail("a capture is already in progress on " + name());
  make_current();
  // Handles, cuBLAS workspace and kernels must exist before the capture:
  // creating them allocates and loads modules, which a capture forbids. The
  // cuBLAS workspace (32 MiB of the pool) only where cuBLAS already ran on
  // this backend: a step captured after its eager warm-up uses cuBLAS only if
  // the warm-up did, and a convolution-only model must not pay for it under a
  // tight cap.
  (void)cudnn();
  if (uses_cublas()) (void)cublas();
  (void)kernel_origin();
  // The pool must not query fences (cudaEventQuery) while this thread
  // captures: settle every pending free first; frees during the capture are
  // held, so none become pending.
  pool_->synchronize();
  cudaError_t status = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return fail(std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(status));
  }
  capturing_ = true;
  pool_->begin_capture();  // no cudaFree, no fence query until it ends
  held_during_capture_.clear();
  std::string error;
  try {
    step();
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  cudaGraph_t graph = nullptr;
  status = cudaStreamEndCapture(stream_, &graph);
  capturing_ = false;
  pool_->end_capture();
  std::vector<void*> held = std::move(held_during_capture_);
  held_during_capture_.clear();
  const auto release_held = [&] {
    for (void* p : held) free(p, 0);
  };
  if (!error.empty() || status != cudaSuccess || !graph) {
    cudaGetLastError();  // capture errors are not sticky; clear the last one
    if (graph) STOKE_CUDA_WARN(cudaGraphDestroy(graph));
    release_held();
    release_retired_workspaces();  // retired during the failed capture
    if (error.empty()) error = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(status);
    return fail("the step could not be captured: " + error);
  }
  cudaGraphExec_t exec = nullptr;
  status = cudaGraphInstantiate(&exec, graph, 0);
  if (status != cudaSuccess) {
    cudaGetLastError();
    STOKE_CUDA_WARN(cudaGraphDestroy(graph));
    release_held();
    release_retired_workspaces();
    return fail(std::string("cudaGraphInstantiate: ") + cudaGetErrorString(status));
  }
  return std::make_unique<CudaCapturedStep>(*this, graph, exec, std::move(held));
}

}  // namespace stoke::cuda
