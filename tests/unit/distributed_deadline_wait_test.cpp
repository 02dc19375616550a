// The bounded wait the NCCL communicator runs around init, enqueue and stream
// waits (lib/distributed/deadline_wait.hpp), with fault injection: a peer that
// never joins (the library reports "in progress" forever), an error raised
// while waiting, and work that completes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "distributed/deadline_wait.hpp"

namespace stoke::distributed_detail {
namespace {

TEST(DeadlineWait, APeerThatNeverJoinsIsAbortedAtTheDeadline) {
  int aborts = 0, polls = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    wait_or_abort(
        [&](std::string&) {
          ++polls;
          return Progress::kPending;
        },
        [&] { ++aborts; }, 0.2, "NCCL init", 1);
    FAIL() << "the wait returned";
  } catch (const CommunicationError& e) {
    EXPECT_EQ(e.rank(), 1);
    EXPECT_NE(std::string(e.what()).find("NCCL init did not complete on rank 1 within 0.2 s"),
              std::string::npos)
        << e.what();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(aborts, 1);
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 5.0);  // bounded: the deadline plus one back-off step
  EXPECT_GT(polls, 1);
}

TEST(DeadlineWait, AnErrorRaisedWhileWaitingAbortsAndNamesTheCause) {
  int aborts = 0, polls = 0;
  try {
    wait_or_abort(
        [&](std::string& why) {
          if (++polls < 5) return Progress::kPending;
          why = "remote process exited";
          return Progress::kFailed;
        },
        [&] { ++aborts; }, 60.0, "ncclAllReduce", 0);
    FAIL() << "the wait returned";
  } catch (const CommunicationError& e) {
    EXPECT_NE(std::string(e.what()).find("ncclAllReduce failed on rank 0: remote process exited"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(polls, 5);
  EXPECT_EQ(aborts, 1);
}

TEST(DeadlineWait, WorkThatCompletesReturnsWithoutAnAbort) {
  int aborts = 0, polls = 0;
  wait_or_abort([&](std::string&) { return ++polls < 100 ? Progress::kPending : Progress::kDone; },
                [&] { ++aborts; }, 60.0, "NCCL init", 0);
  EXPECT_EQ(polls, 100);
  EXPECT_EQ(aborts, 0);
}

}  // namespace
}  // namespace stoke::distributed_detail
