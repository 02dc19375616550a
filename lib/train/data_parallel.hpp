// The trainer's data-parallel part (TrainerOptions::communicator with more
// than one rank): shards the loaders, starts every rank from rank 0's
// weights, averages gradients across ranks between backward and update,
// agrees on stopping, reduces each epoch's metrics, and leaves the files to
// rank 0. Communication time goes to the profiler's kCommunicate stage.
#pragma once

#include <exception>
#include <memory>

#include "stoke/cuda.hpp"
#include "stoke/distributed.hpp"
#include "stoke/train.hpp"
#include "train/gradient_buckets.hpp"
#include "train/step_runner.hpp"

namespace stoke::detail {

class DataParallel {
 public:
  // nullptr unless the options name a communicator of more than one rank.
  static std::unique_ptr<DataParallel> make(const TrainerOptions& options, Profiler& profiler);

  int rank() const noexcept { return comm_.rank(); }
  // Only rank 0 writes checkpoints and logs epoch lines.
  bool writes_files() const noexcept { return comm_.rank() == 0; }

  // This rank's shard of the training epochs (validation: see Loaders::build).
  void shard(LoaderOptions& options) const;
  // Every rank starts from rank 0's parameters and buffers.
  void broadcast_model(nn::Model& model);
  // Averages the gradients across ranks, then runs `user` (may be empty).
  // With gradient buckets, waits for the buckets backward_progress() sent
  // and sends the rest.
  GradientHook gradient_hook(GradientHook user);
  // For Model::backward: on a host backend with gradient_bucket_bytes > 0,
  // sends each bucket of gradients as soon as backward has completed it
  // (GradientBuckets); otherwise empty (the hook averages the whole block).
  nn::Model::GradientsReady backward_progress(nn::Model& model);
  // True on every rank when any rank asked to stop (one small allreduce
  // after each optimizer step, at the same step on every rank).
  bool agree_stop(bool requested);
  // Turns this rank's epoch record into the run's: images and sums over
  // ranks (training and validation).
  void reduce(EpochRecord& record);
  // Batch norm runs per rank (each rank's batch statistics); at each epoch's
  // end the running statistics become the mean over ranks, so every rank
  // holds the same model.
  void average_buffers(nn::Model& model);
  // Debug builds, after every update: InternalError unless every rank holds
  // rank 0's parameters (a checksum broadcast from rank 0).
  void check_identical(const nn::Model& model);
  // Leaves `error`'s text for the other ranks, whose next collective fails.
  void report(const std::exception& error) noexcept;

 private:
  DataParallel(Communicator& comm, Profiler& profiler, std::size_t bucket_bytes)
      : comm_(comm), profiler_(profiler), bucket_bytes_(bucket_bytes) {}
  // The buckets' wait at the end of backward (the communication time the
  // step still sees), then the user's hook.
  void finish_buckets(Tensor& gradients);
  // The mean over ranks of a tensor on any backend: host tensors in place;
  // on a GPU backend through NCCL on the compute stream when every rank's
  // backend has it, else through the host (a copy each way).
  void allreduce_mean(Tensor& tensor);
  // At the first allreduce_mean (every rank at once): NCCL when every
  // rank's backend offers device collectives, else nullptr (host path).
  // Logs which.
  DeviceCommunicator* device_communicator(Tensor& tensor);

  Communicator& comm_;
  Profiler& profiler_;
  bool device_decided_ = false;
  std::unique_ptr<DeviceCommunicator> device_;
  const Backend* device_backend_ = nullptr;  // the backend device_ runs on
  std::size_t bucket_bytes_;
  std::unique_ptr<GradientBuckets> buckets_;  // host backends with buckets, from the first step
  bool described_ = false;                    // the buckets' first step was logged
};

}  // namespace stoke::detail
