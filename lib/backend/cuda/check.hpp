// One check behind STOKE_CUDA_CHECK, STOKE_CUDNN_CHECK, STOKE_CUBLAS_CHECK and
// STOKE_NVRTC_CHECK: the failing call as written, file:line, the status text,
// the current device and a hint where one exists. The *_WARN variants log
// instead of throwing, for destructors.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nvrtc.h>

#include <string>

#include "stoke/error.hpp"

namespace stoke::cuda {

struct StatusInfo {
  bool ok;
  int status;
  const char* library;
  std::string text;
  ErrorCode code;
};

inline StatusInfo status_info(cudaError_t s) {
  return {s == cudaSuccess, static_cast<int>(s), "CUDA", cudaGetErrorString(s), ErrorCode::kCuda};
}
inline StatusInfo status_info(cudnnStatus_t s) {
  return {s == CUDNN_STATUS_SUCCESS, static_cast<int>(s), "cuDNN", cudnnGetErrorString(s),
          ErrorCode::kCudnn};
}
inline StatusInfo status_info(cublasStatus_t s) {
  return {s == CUBLAS_STATUS_SUCCESS, static_cast<int>(s), "cuBLAS", cublasGetStatusString(s),
          ErrorCode::kCublas};
}
inline StatusInfo status_info(nvrtcResult s) {
  return {s == NVRTC_SUCCESS, static_cast<int>(s), "NVRTC", nvrtcGetErrorString(s),
          ErrorCode::kNvrtc};
}

// "cudaMalloc(&p, n) failed at lib/x.cpp:12 on device 0: out of memory (status 2)".
std::string describe_failure(const StatusInfo& info, const char* call, const char* file, int line);

[[noreturn]] void throw_failure(const StatusInfo& info, const char* call, const char* file,
                                int line);
void log_failure(const StatusInfo& info, const char* call, const char* file, int line) noexcept;

template <typename Status>
inline void check(Status status, const char* call, const char* file, int line) {
  const StatusInfo info = status_info(status);
  if (!info.ok) throw_failure(info, call, file, line);
}

template <typename Status>
inline bool check_warn(Status status, const char* call, const char* file, int line) noexcept {
  const StatusInfo info = status_info(status);
  if (!info.ok) log_failure(info, call, file, line);
  return info.ok;
}

}  // namespace stoke::cuda

#define STOKE_GPU_CHECK_IMPL(expr) ::stoke::cuda::check((expr), #expr, __FILE__, __LINE__)
#define STOKE_GPU_WARN_IMPL(expr) ::stoke::cuda::check_warn((expr), #expr, __FILE__, __LINE__)

#define STOKE_CUDA_CHECK(expr) STOKE_GPU_CHECK_IMPL(expr)
#define STOKE_CUDNN_CHECK(expr) STOKE_GPU_CHECK_IMPL(expr)
#define STOKE_CUBLAS_CHECK(expr) STOKE_GPU_CHECK_IMPL(expr)
#define STOKE_NVRTC_CHECK(expr) STOKE_GPU_CHECK_IMPL(expr)
#define STOKE_CUDA_WARN(expr) STOKE_GPU_WARN_IMPL(expr)
#define STOKE_CUDNN_WARN(expr) STOKE_GPU_WARN_IMPL(expr)
