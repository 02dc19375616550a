#include "backend/cuda/check.hpp"

#include "stoke/log.hpp"

namespace stoke::cuda {
namespace {

const char* hint_for(const StatusInfo& info) {
  if (info.code == ErrorCode::kCuda) {
    switch (static_cast<cudaError_t>(info.status)) {
      case cudaErrorMemoryAllocation:
        return "lower the batch size or raise STOKE_GPU_MEM_PERCENT / STOKE_GPU_MEM_MAX";
      case cudaErrorInsufficientDriver:
      case cudaErrorNoDevice:
        return "no usable CUDA driver/device: run with STOKE_GPU_DEVICE=cpu";
      case cudaErrorInvalidDevice:
        return "check STOKE_GPU_DEVICE against `stoke-info` and CUDA_VISIBLE_DEVICES";
      default:
        break;
    }
  }
  if (info.code == ErrorCode::kCudnn && info.status == CUDNN_STATUS_NOT_INITIALIZED) {
    return "cuDNN could not initialize: check the driver and that libcudnn matches the CUDA "
           "runtime";
  }
  return nullptr;
}

}  // namespace

std::string describe_failure(const StatusInfo& info, const char* call, const char* file, int line) {
  int device = -1;
  const bool have_device = cudaGetDevice(&device) == cudaSuccess;
  std::string message = std::string(info.library) + " call " + call + " failed at " + file + ":" +
                        std::to_string(line) + " on " +
                        (have_device ? "device " + std::to_string(device) : "no current device") +
                        ": " + info.text + " (status " + std::to_string(info.status) + ")";
  if (const char* hint = hint_for(info)) message += "; " + std::string(hint);
  return message;
}

void throw_failure(const StatusInfo& info, const char* call, const char* file, int line) {
  throw GpuLibraryError(info.code, describe_failure(info, call, file, line), info.status);
}

void log_failure(const StatusInfo& info, const char* call, const char* file, int line) noexcept {
  try {
    log_error(describe_failure(info, call, file, line));
  } catch (...) {
    // Logging from a destructor must never throw.
  }
}

}  // namespace stoke::cuda
