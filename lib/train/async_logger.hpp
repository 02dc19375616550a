// A logger whose push() never waits for I/O: lines go to a queue that a
// background thread writes out, so logging never blocks the training step.
// Nothing is dropped: the destructor drains the queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "stoke/export.hpp"

namespace stoke::detail {

class STOKE_INTERNAL AsyncLogger {
 public:
  // stream null: lines go to stoke's log at info level.
  explicit AsyncLogger(std::ostream* stream);
  ~AsyncLogger();
  AsyncLogger(const AsyncLogger&) = delete;
  AsyncLogger& operator=(const AsyncLogger&) = delete;

  void push(std::string line);
  // Blocks until every pushed line is written.
  void flush();

 private:
  void run();

  std::ostream* stream_;
  std::mutex mutex_;
  std::condition_variable ready_, drained_;
  std::deque<std::string> queue_;
  bool writing_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace stoke::detail
