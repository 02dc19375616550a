#include "train/data_parallel.hpp"

#include <vector>

#include "distributed/group_id.hpp"
#include "stoke/backend.hpp"
#include "stoke/log.hpp"
#include "stoke/nn/model.hpp"

namespace stoke::detail {
namespace {

// A tensor's float32 elements as a host vector (any backend), and back.
std::vector<float> to_host(const Tensor& t) {
  return t.to_vector();
}

void from_host(Tensor& t, const std::vector<float>& host) {
  t.copy_from_host(host.data());
}

std::span<float> host_span(Tensor& t) {
  return {t.data<float>(), static_cast<std::size_t>(t.numel())};
}

}  // namespace

std::unique_ptr<DataParallel> DataParallel::make(const TrainerOptions& options,
                                                 Profiler& profiler) {
  if (!options.communicator || options.communicator->world_size() == 1) return nullptr;
  return std::unique_ptr<DataParallel>(
      new DataParallel(*options.communicator, profiler, options.gradient_bucket_bytes));
}

void DataParallel::shard(LoaderOptions& options) const {
  options.shard_index = comm_.rank();
  options.shard_count = comm_.world_size();
  options.shard_whole_steps = true;
}

void DataParallel::broadcast_model(nn::Model& model) {
  auto span = profiler_.span(Stage::kCommunicate);
  std::vector<Tensor*> blocks = {&model.parameters()};
  std::vector<nn::NamedTensor> buffers = model.named_buffers();
  for (auto& b : buffers) blocks.push_back(&b.tensor);
  for (Tensor* t : blocks) {
    if (t->dtype() != DType::kFloat32) {
      throw Unsupported("data-parallel training: model tensors must be float32 to broadcast");
    }
    if (t->backend().is_host()) {
      comm_.broadcast(host_span(*t), 0);
      continue;
    }
    std::vector<float> host = to_host(*t);
    comm_.broadcast(host, 0);
    from_host(*t, host);
  }
}

DeviceCommunicator* DataParallel::device_communicator(Tensor& tensor) {
  if (device_decided_) return device_.get();
  device_decided_ = true;
  GpuBackend* gpu = tensor.backend().gpu();
  const std::string why =
      gpu ? gpu->device_collectives_unavailable() : tensor.backend().name() + " is a host backend";
  // The same choice on every rank: NCCL only when all of them have it.
  std::vector<float> ready = {why.empty() ? 1.0f : 0.0f};
  comm_.allreduce_sum(ready);
  if (ready[0] < static_cast<float>(comm_.world_size())) {
    if (gpu) {
      log_info("data-parallel gradients through the host (" + comm_.name() +
               "): " + (why.empty() ? "another rank's backend has no device collectives" : why));
    }
    return nullptr;
  }
  const std::vector<std::uint8_t> id = share_group_id(
      comm_, [gpu] { return gpu->new_device_group_id(); }, kDeviceGroupIdBytes);
  device_ = gpu->join_device_group(comm_.rank(), comm_.world_size(), id, comm_.timeout_seconds());
  device_backend_ = gpu;
  log_info("data-parallel gradients on " + device_->name() + " (" + gpu->name() +
           ", compute stream)");
  return device_.get();
}

void DataParallel::allreduce_mean(Tensor& tensor) {
  auto span = profiler_.span(Stage::kCommunicate);
  DeviceCommunicator* device = device_communicator(tensor);
  if (device && &tensor.backend() == device_backend_ && tensor.dtype() == DType::kFloat32) {
    device->allreduce_mean(tensor);  // queued on the compute stream: no host wait
    return;
  }
  // Through the host: the block is complete once the backend has run.
  tensor.backend().synchronize();
  if (tensor.backend().is_host() && tensor.dtype() == DType::kFloat32) {
    comm_.allreduce_mean(host_span(tensor));
    return;
  }
  std::vector<float> host = to_host(tensor);
  comm_.allreduce_mean(host);
  from_host(tensor, host);
}

GradientHook DataParallel::gradient_hook(GradientHook user) {
  return [this, user = std::move(user)](Tensor& gradients) {
    if (buckets_) {  // made only for a host backend's model (backward_progress)
      finish_buckets(gradients);
    } else {
      allreduce_mean(gradients);
    }
    if (user) user(gradients);
  };
}

nn::Model::GradientsReady DataParallel::backward_progress(nn::Model& model) {
  if (bucket_bytes_ == 0 || !model.backend().is_host() ||
      model.gradients().dtype() != DType::kFloat32)
    return {};
  if (!buckets_) buckets_ = std::make_unique<GradientBuckets>(comm_, bucket_bytes_);
  return
      [this, &model](std::int64_t first) { buckets_->ready(host_span(model.gradients()), first); };
}

void DataParallel::finish_buckets(Tensor& gradients) {
  const std::uint64_t early = buckets_->sent_early();
  {
    auto span = profiler_.span(Stage::kCommunicate);
    buckets_->finish(host_span(gradients));
  }
  if (!described_) {  // the first step: say how it went
    described_ = true;
    const std::size_t bytes = buckets_->bucket_floats() * sizeof(float);
    const std::string size = bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                             : bytes % 1024 == 0    ? std::to_string(bytes >> 10) + " KiB"
                                                    : std::to_string(bytes) + " B";
    log_info("data-parallel gradients in " + std::to_string(buckets_->sent()) + " buckets of " +
             size + " on a " + comm_.name() + " communication thread, " + std::to_string(early) +
             " of them sent while backward ran");
  }
}

bool DataParallel::agree_stop(bool requested) {
  auto span = profiler_.span(Stage::kCommunicate);
  std::vector<float> flag = {requested ? 1.0f : 0.0f};
  comm_.allreduce_sum(flag);
  return flag[0] > 0.0f;
}

void DataParallel::reduce(EpochRecord& r) {
  auto span = profiler_.span(Stage::kCommunicate);
  const auto images = static_cast<double>(r.images);
  const auto val_images = static_cast<double>(r.val_images);
  std::vector<float> sums = {static_cast<float>(images),
                             static_cast<float>(r.train_loss * images),
                             static_cast<float>(r.train_accuracy * images),
                             static_cast<float>(val_images),
                             static_cast<float>(r.val_loss * val_images),
                             static_cast<float>(r.val_accuracy * val_images)};
  comm_.allreduce_sum(sums);
  r.images = static_cast<std::uint64_t>(sums[0]);
  r.train_loss = sums[0] > 0 ? sums[1] / sums[0] : 0.0;
  r.train_accuracy = sums[0] > 0 ? sums[2] / sums[0] : 0.0;
  r.val_images = static_cast<std::uint64_t>(sums[3]);
  r.validated = sums[3] > 0;
  r.val_loss = sums[3] > 0 ? sums[4] / sums[3] : 0.0;
  r.val_accuracy = sums[3] > 0 ? sums[5] / sums[3] : 0.0;
  r.images_per_second = r.seconds > 0 ? static_cast<double>(r.images) / r.seconds : 0.0;
}

void DataParallel::average_buffers(nn::Model& model) {
  for (auto& buffer : model.named_buffers()) {
    if (buffer.tensor.dtype() == DType::kFloat32) allreduce_mean(buffer.tensor);
  }
}

void DataParallel::check_identical(const nn::Model& model) {
#ifndef NDEBUG
  Tensor params = model.parameters();
  const std::vector<float> host = to_host(params);
  double sum = 0, weighted = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    sum += host[i];
    weighted += host[i] * static_cast<double>(i % 1021);
  }
  std::vector<float> mine = {static_cast<float>(sum), static_cast<float>(weighted)};
  std::vector<float> root = mine;
  comm_.broadcast(root, 0);
  if (root != mine) {
    throw Error(ErrorCode::kInternal,
                "data-parallel training: rank " + std::to_string(comm_.rank()) +
                    "'s parameters differ from rank 0's after an update (checksum " +
                    std::to_string(mine[0]) + " vs " + std::to_string(root[0]) + ")");
  }
#else
  (void)model;
#endif
}

void DataParallel::report(const std::exception& error) noexcept {
  comm_.report_failure(error.what());
}

}  // namespace stoke::detail
