// Status codes, the thread-local last error, the one Runtime.
#include "c_api/boundary.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "stoke/version.hpp"

namespace stoke::c_api {
namespace {

// This thread's last message, on the heap: libstoke's thread-locals are
// static TLS (loaded by dlopen from a host's interpreter, a large one would
// not fit the loader's surplus). Grown with realloc, which does not throw:
// recording an error never throws (it may be reporting a bad_alloc).
struct LastError {
  char* text = nullptr;
  std::size_t capacity = 0;
  ~LastError() { std::free(text); }
};
thread_local LastError t_last_error;
constexpr char kUnrecorded[] = "(the error message could not be stored: out of memory)";

const char* last_error() noexcept {
  return t_last_error.text ? t_last_error.text : "";
}

}  // namespace

stoke_status fail(stoke_status status, const char* function, const char* message) noexcept {
  const std::size_t f = std::strlen(function), m = std::strlen(message);
  const std::size_t size = f + 2 + m + 1;
  LastError& e = t_last_error;
  if (size > e.capacity) {
    if (char* grown = static_cast<char*>(std::realloc(e.text, size))) {
      e.text = grown;
      e.capacity = size;
    }
  }
  if (size > e.capacity) {  // no memory for this message: keep a fixed one
    if (e.capacity >= sizeof kUnrecorded)
      std::memcpy(e.text, kUnrecorded, sizeof kUnrecorded);
    else if (e.text)
      e.text[0] = '\0';
    return status;
  }
  std::memcpy(e.text, function, f);
  std::memcpy(e.text + f, ": ", 2);
  std::memcpy(e.text + f + 2, message, m + 1);
  return status;
}

stoke_status status_of(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return STOKE_ERROR_INVALID_ARGUMENT;
    case ErrorCode::kConfig:
      return STOKE_ERROR_CONFIG;
    case ErrorCode::kIo:
      return STOKE_ERROR_IO;
    case ErrorCode::kDecode:
      return STOKE_ERROR_DECODE;
    case ErrorCode::kOutOfMemory:
      return STOKE_ERROR_OUT_OF_MEMORY;
    case ErrorCode::kCuda:
    case ErrorCode::kCudnn:
    case ErrorCode::kCublas:
    case ErrorCode::kNvrtc:
      return STOKE_ERROR_GPU;
    case ErrorCode::kUnsupported:
      return STOKE_ERROR_UNSUPPORTED;
    case ErrorCode::kCorruptFile:
      return STOKE_ERROR_CORRUPT_FILE;
    case ErrorCode::kCancelled:
      return STOKE_ERROR_CANCELLED;
    case ErrorCode::kCommunication:
      return STOKE_ERROR_COMMUNICATION;
    case ErrorCode::kNonFinite:
      return STOKE_ERROR_NON_FINITE;
    case ErrorCode::kInternal:
      break;
  }
  return STOKE_ERROR_INTERNAL;
}

void require(const void* pointer, const char* what) {
  if (!pointer) throw InvalidArgument(std::string(what) + " is NULL");
}

const Runtime& runtime() {
  // Never destroyed: a host may call in from its own exit handlers, after
  // static destructors ran.
  static std::mutex mutex;
  static const Runtime* runtime = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!runtime) runtime = new Runtime(init());
  return *runtime;
}

stoke_status copy_text(const std::string& text, char* buffer, std::size_t capacity,
                       std::size_t* needed, const char* what) {
  if (needed) *needed = text.size() + 1;
  if (capacity < text.size() + 1) {
    throw Failure{STOKE_ERROR_BUFFER_TOO_SMALL,
                  std::string(what) + " needs " + std::to_string(text.size() + 1) +
                      " bytes, the buffer holds " + std::to_string(capacity)};
  }
  require(buffer, "buffer");
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return STOKE_OK;
}

}  // namespace stoke::c_api

extern "C" {

const char* stoke_version(void) {
  return stoke::version();
}

int32_t stoke_abi_version(void) {
  return STOKE_C_ABI_VERSION;
}

const char* stoke_last_error(void) {
  return stoke::c_api::last_error();
}

const char* stoke_status_name(int32_t status) {
  switch (status) {
    case STOKE_OK:
      return "STOKE_OK";
    case STOKE_ERROR_INVALID_ARGUMENT:
      return "STOKE_ERROR_INVALID_ARGUMENT";
    case STOKE_ERROR_CONFIG:
      return "STOKE_ERROR_CONFIG";
    case STOKE_ERROR_IO:
      return "STOKE_ERROR_IO";
    case STOKE_ERROR_DECODE:
      return "STOKE_ERROR_DECODE";
    case STOKE_ERROR_CORRUPT_FILE:
      return "STOKE_ERROR_CORRUPT_FILE";
    case STOKE_ERROR_OUT_OF_MEMORY:
      return "STOKE_ERROR_OUT_OF_MEMORY";
    case STOKE_ERROR_UNSUPPORTED:
      return "STOKE_ERROR_UNSUPPORTED";
    case STOKE_ERROR_GPU:
      return "STOKE_ERROR_GPU";
    case STOKE_ERROR_CANCELLED:
      return "STOKE_ERROR_CANCELLED";
    case STOKE_ERROR_NON_FINITE:
      return "STOKE_ERROR_NON_FINITE";
    case STOKE_ERROR_BUFFER_TOO_SMALL:
      return "STOKE_ERROR_BUFFER_TOO_SMALL";
    case STOKE_ERROR_COMMUNICATION:
      return "STOKE_ERROR_COMMUNICATION";
    case STOKE_ERROR_INTERNAL:
      return "STOKE_ERROR_INTERNAL";
  }
  return "unknown stoke_status";
}

}  // extern "C"
