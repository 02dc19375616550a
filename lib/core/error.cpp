#include "stoke/error.hpp"

namespace stoke {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kConfig:
      return "config";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kDecode:
      return "decode";
    case ErrorCode::kOutOfMemory:
      return "out of memory";
    case ErrorCode::kCuda:
      return "cuda";
    case ErrorCode::kCudnn:
      return "cudnn";
    case ErrorCode::kCublas:
      return "cublas";
    case ErrorCode::kNvrtc:
      return "nvrtc";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kCorruptFile:
      return "corrupt file";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kCommunication:
      return "communication";
    case ErrorCode::kNonFinite:
      return "non-finite";
  }
  return "unknown";
}

}  // namespace stoke
