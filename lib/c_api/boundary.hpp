// The C ABI's side of the boundary (include/stoke/stoke.h): every exported
// function runs its body in guarded(), which turns each exception into a
// status and this thread's last-error message, so nothing C++ crosses.
#pragma once

#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include "stoke/error.hpp"
#include "stoke/runtime.hpp"
#include "stoke/stoke.h"

namespace stoke::c_api {

// A status with its message (thrown inside, caught by guarded()): for the
// failures that are not a stoke::Error, such as a buffer that is too small.
struct Failure {
  stoke_status status;
  std::string message;
};

// Records `message` as this thread's last error (truncated to the buffer;
// never throws) and returns `status`.
stoke_status fail(stoke_status status, const char* function, const char* message) noexcept;

// The status a stoke::Error's code maps to.
stoke_status status_of(ErrorCode code) noexcept;

// Runs body() (returning a stoke_status); any exception becomes a status
// and a message that starts with `function`.
template <class Body>
stoke_status guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const Failure& f) {
    return fail(f.status, function, f.message.c_str());
  } catch (const Error& e) {
    return fail(status_of(e.code()), function, e.what());
  } catch (const std::bad_alloc&) {
    return fail(STOKE_ERROR_OUT_OF_MEMORY, function, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return fail(STOKE_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return fail(STOKE_ERROR_INTERNAL, function, "an exception of unknown type");
  }
}

// `pointer` must not be null: InvalidArgument naming `what` otherwise.
void require(const void* pointer, const char* what);

// The process's Runtime: stoke::init() (the environment's STOKE_* knobs) on
// the first call, the same one after; thread-safe. A failing init is
// retried by the next call.
const Runtime& runtime();

// Copies `text` with its NUL into buffer (capacity bytes); *needed (may be
// null) gets text.size() + 1. Failure kBufferTooSmall when it does not fit.
stoke_status copy_text(const std::string& text, char* buffer, std::size_t capacity,
                       std::size_t* needed, const char* what);

}  // namespace stoke::c_api
