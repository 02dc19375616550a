// Waiting on work a library reports only when asked (NCCL's non-blocking
// communicators: init, a collective's enqueue, a stream holding a collective):
// poll until it is done; on an error the library reports, or past a deadline,
// abort it and throw CommunicationError. Nothing waits without a bound.
// Header-only: the CUDA plugin uses it as well as libstoke's tests.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "stoke/distributed.hpp"

namespace stoke::distributed_detail {

enum class Progress { kDone, kPending, kFailed };

// poll(std::string& why) -> Progress (why: the library's message when
// kFailed); abort() -> void, called once before the throw. The message names
// `what`, the rank and, for the deadline, how long it waited.
template <class Poll, class Abort>
void wait_or_abort(const Poll& poll, const Abort& abort, double deadline_seconds,
                   const std::string& what, int rank) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = std::chrono::duration<double>(deadline_seconds);
  std::string why;
  for (int polls = 0;; ++polls) {
    switch (poll(why)) {
      case Progress::kDone:
        return;
      case Progress::kFailed:
        abort();
        throw CommunicationError(what + " failed on rank " + std::to_string(rank) + ": " + why +
                                     " (the group was aborted)",
                                 rank);
      case Progress::kPending:
        break;
    }
    if (clock::now() - start > deadline) {
      abort();
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.1f", deadline_seconds);
      throw CommunicationError(what + " did not complete on rank " + std::to_string(rank) +
                                   " within " + waited +
                                   " s (STOKE_DIST_TIMEOUT): a rank never joined, died or hangs; "
                                   "the group was aborted",
                               rank);
    }
    // Spin briefly (a collective's enqueue is microseconds), then back off.
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(polls < 1024 ? 50 : 1000));
    }
  }
}

}  // namespace stoke::distributed_detail
