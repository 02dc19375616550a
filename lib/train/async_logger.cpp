#include "train/async_logger.hpp"

#include "stoke/log.hpp"

namespace stoke::detail {

AsyncLogger::AsyncLogger(std::ostream* stream) : stream_(stream), thread_([this] { run(); }) {}

AsyncLogger::~AsyncLogger() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

void AsyncLogger::push(std::string line) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(line));
  }
  ready_.notify_one();
}

void AsyncLogger::flush() {
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

void AsyncLogger::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    ready_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) break;
    std::deque<std::string> lines;
    lines.swap(queue_);
    writing_ = true;
    lock.unlock();
    for (const auto& line : lines) {
      if (stream_) {
        *stream_ << line << '\n';
      } else {
        log_info(line);
      }
    }
    if (stream_) stream_->flush();
    lock.lock();
    writing_ = false;
    drained_.notify_all();
  }
}

}  // namespace stoke::detail
