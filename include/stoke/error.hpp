// stoke's error types. Every failure the library reports is a stoke::Error
// carrying a code a program can switch on and a message a user can act on.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "stoke/export.hpp"

namespace stoke {

enum class ErrorCode : std::uint8_t {
  kInvalidArgument,
  kConfig,
  kIo,
  kDecode,
  kOutOfMemory,
  kCuda,
  kCudnn,
  kCublas,
  kNvrtc,
  kUnsupported,
  kCorruptFile,
  kCancelled,
  kInternal,
  kCommunication,  // a collective between ranks failed (see distributed.hpp)
  kNonFinite,      // a NaN or an infinity where a number must be finite (a diverged model)
};

// Name of a code, e.g. "config" for ErrorCode::kConfig.
STOKE_API const char* to_string(ErrorCode code) noexcept;

class STOKE_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// A knob with a bad value, an unknown key in a config file, an impossible
// device request. The message names the knob, the value and what is accepted.
class STOKE_API ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& message) : Error(ErrorCode::kConfig, message) {}
};

class STOKE_API InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& message)
      : Error(ErrorCode::kInvalidArgument, message) {}
};

// A file that is missing, unreadable or unwritable; the message names the path.
class STOKE_API IoError : public Error {
 public:
  explicit IoError(const std::string& message) : Error(ErrorCode::kIo, message) {}
};

// An image that cannot be decoded; the message names the file and the reason.
class STOKE_API DecodeError : public Error {
 public:
  explicit DecodeError(const std::string& message) : Error(ErrorCode::kDecode, message) {}
};

// A file whose content is truncated, corrupt or of the wrong version
// (checkpoint, cache, dataset); the message says what is wrong and where.
class STOKE_API CorruptFile : public Error {
 public:
  explicit CorruptFile(const std::string& message) : Error(ErrorCode::kCorruptFile, message) {}
};

// A request the pool cannot serve under its cap. The message names the cap,
// the request, the memory in use and the knob to turn.
class STOKE_API OutOfMemory : public Error {
 public:
  OutOfMemory(const std::string& message, std::uint64_t requested, std::uint64_t cap,
              std::uint64_t in_use)
      : Error(ErrorCode::kOutOfMemory, message),
        requested_(requested),
        cap_(cap),
        in_use_(in_use) {}
  std::uint64_t requested() const noexcept { return requested_; }
  std::uint64_t cap() const noexcept { return cap_; }
  std::uint64_t in_use() const noexcept { return in_use_; }

 private:
  std::uint64_t requested_;
  std::uint64_t cap_;
  std::uint64_t in_use_;
};

// A failed call into a GPU library (CUDA runtime, cuDNN, cuBLAS, NVRTC). The
// message names the call, the status text, the device and the source location.
class STOKE_API GpuLibraryError : public Error {
 public:
  GpuLibraryError(ErrorCode code, const std::string& message, int status)
      : Error(code, message), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

class STOKE_API Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& message) : Error(ErrorCode::kUnsupported, message) {}
};

// A loss, a weight or a logit that is NaN or infinite: training diverged (a
// learning rate too high), or a model file holds such a model.
class STOKE_API NonFinite : public Error {
 public:
  explicit NonFinite(const std::string& message) : Error(ErrorCode::kNonFinite, message) {}
};

// A run stopped on request (fit() asked to stop, a cancelled pipeline).
class STOKE_API Cancelled : public Error {
 public:
  explicit Cancelled(const std::string& message) : Error(ErrorCode::kCancelled, message) {}
};

}  // namespace stoke
