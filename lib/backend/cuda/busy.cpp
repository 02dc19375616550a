// Device-busy time from pairs of CUDA events on the compute stream, harvested
// without blocking: an interval counts once its stop event has completed.
#include "backend/cuda/check.hpp"
#include "backend/cuda/cuda_backend.hpp"

namespace stoke::cuda {

cudaEvent_t CudaBackend::busy_event() {
  if (!busy_spare_.empty()) {
    cudaEvent_t e = busy_spare_.back();
    busy_spare_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  STOKE_CUDA_CHECK(cudaEventCreate(&e));  // with timing
  return e;
}

void CudaBackend::begin_busy() {
  if (capturing_ || busy_open_) return;
  make_current();
  cudaEvent_t e = busy_event();
  STOKE_CUDA_CHECK(cudaEventRecord(e, stream_));
  busy_open_ = e;
}

void CudaBackend::end_busy() {
  if (capturing_ || !busy_open_) return;
  make_current();
  cudaEvent_t e = busy_event();
  STOKE_CUDA_CHECK(cudaEventRecord(e, stream_));
  busy_pending_.push_back({busy_open_, e});
  busy_open_ = nullptr;
}

double CudaBackend::take_busy_seconds(bool wait) {
  make_current();
  double ms_total = 0;
  while (!busy_pending_.empty()) {
    const BusyInterval interval = busy_pending_.front();
    if (wait) {
      STOKE_CUDA_CHECK(cudaEventSynchronize(interval.stop));
    } else {
      const cudaError_t status = cudaEventQuery(interval.stop);
      if (status == cudaErrorNotReady) {
        cudaGetLastError();  // not an error: leave no "last error" behind
        break;
      }
      STOKE_CUDA_CHECK(status);
    }
    float ms = 0.0f;
    STOKE_CUDA_CHECK(cudaEventElapsedTime(&ms, interval.start, interval.stop));
    ms_total += ms;
    busy_pending_.pop_front();
    busy_spare_.push_back(interval.start);
    busy_spare_.push_back(interval.stop);
  }
  return ms_total * 1e-3;
}

void CudaBackend::destroy_busy_events() noexcept {
  if (busy_open_) STOKE_CUDA_WARN(cudaEventDestroy(busy_open_));
  for (const auto& interval : busy_pending_) {
    STOKE_CUDA_WARN(cudaEventDestroy(interval.start));
    STOKE_CUDA_WARN(cudaEventDestroy(interval.stop));
  }
  for (cudaEvent_t e : busy_spare_) STOKE_CUDA_WARN(cudaEventDestroy(e));
  busy_open_ = nullptr;
  busy_pending_.clear();
  busy_spare_.clear();
}

}  // namespace stoke::cuda
