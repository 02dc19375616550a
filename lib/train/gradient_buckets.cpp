#include "train/gradient_buckets.hpp"

#include <algorithm>
#include <utility>

#include "stoke/error.hpp"

namespace stoke::detail {

GradientBuckets::GradientBuckets(Communicator& comm, std::size_t bucket_bytes)
    : comm_(comm), bucket_floats_(std::max<std::size_t>(bucket_bytes / sizeof(float), 1)) {
  thread_ = std::thread([this] { serve(); });
}

GradientBuckets::~GradientBuckets() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::span<float> GradientBuckets::bucket(std::span<float> gradients, std::size_t k) const {
  const std::size_t end = gradients.size() - k * bucket_floats_;
  const std::size_t begin = end > bucket_floats_ ? end - bucket_floats_ : 0;
  return gradients.subspan(begin, end - begin);
}

void GradientBuckets::ready(std::span<float> gradients, std::int64_t first) {
  const auto from = static_cast<std::size_t>(std::max<std::int64_t>(first, 0));
  while (next_ * bucket_floats_ < gradients.size()) {
    const std::span<float> b = bucket(gradients, next_);
    if (b.data() - gradients.data() < static_cast<std::ptrdiff_t>(from)) return;
    send(b);
    ++sent_early_;
  }
}

void GradientBuckets::finish(std::span<float> gradients) {
  while (next_ * bucket_floats_ < gradients.size()) send(bucket(gradients, next_));
  next_ = 0;
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void GradientBuckets::send(std::span<float> span) {
  ++next_;
  ++sent_;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(span);
    ++pending_;
  }
  wake_.notify_one();
}

// The communication thread: averages the buckets in order. After a failure
// the rest of the step's buckets are dropped (the run is ending; the other
// ranks' collectives fail by their timeout or the failure note).
void GradientBuckets::serve() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const std::span<float> span = queue_.front();
    queue_.pop_front();
    const bool failed = error_ != nullptr;
    lock.unlock();
    std::exception_ptr error;
    if (!failed) {
      try {
        comm_.allreduce_mean(span);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace stoke::detail
