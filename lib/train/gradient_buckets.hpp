// The data-parallel gradient allreduce overlapped with the backward pass, on
// host backends (CPU ranks on Gloo).
//
// The flat gradient block is cut from its end into buckets of about
// bucket_bytes (the last layers' gradients are at the end and are computed
// first). While backward runs, Model::backward tells from which offset on
// the gradients are final; every bucket wholly past it goes to this object's
// communication thread at once, which averages the buckets over the ranks in
// the order they came, the same order on every rank (as Gloo requires of
// collectives). finish() hands over what is left, waits for all of it, and
// rethrows a collective's failure. The result is the mean over ranks of
// every gradient, as one allreduce of the whole block would give: with two
// ranks bit for bit, with more up to the reduction order of each chunk.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>

#include "stoke/distributed.hpp"

namespace stoke::detail {

class GradientBuckets {
 public:
  // bucket_bytes > 0. The thread starts here and serves the whole fit.
  GradientBuckets(Communicator& comm, std::size_t bucket_bytes);
  // Waits for a collective in flight (the communicator's timeout bounds it);
  // buckets still queued are dropped.
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // During backward: every element of gradients at index >= first is final.
  // Sends the buckets that became complete; returns at once.
  void ready(std::span<float> gradients, std::int64_t first);
  // After backward: sends the rest and waits until every bucket of this step
  // has been averaged; CommunicationError (or the collective's error) if one
  // failed. Then the next step may begin.
  void finish(std::span<float> gradients);

  std::size_t bucket_floats() const noexcept { return bucket_floats_; }
  // Buckets sent during backward (before finish()) and in all, since construction.
  std::uint64_t sent_early() const noexcept { return sent_early_; }
  std::uint64_t sent() const noexcept { return sent_; }

 private:
  // Bucket k (k = 0 at the block's end) of a block of n floats.
  std::span<float> bucket(std::span<float> gradients, std::size_t k) const;
  void send(std::span<float> span);
  void serve();

  Communicator& comm_;
  std::size_t bucket_floats_;
  std::size_t next_ = 0;  // buckets of this step sent so far
  std::uint64_t sent_early_ = 0, sent_ = 0;

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::span<float>> queue_;
  std::size_t pending_ = 0;  // sent and not yet averaged (queued or in flight)
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace stoke::detail
