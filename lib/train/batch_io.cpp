#include "train/batch_io.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "gpu/cuda_device.hpp"
#include "gpu/prefetch_device.hpp"
#include "prefetch/ring.hpp"
#include "stoke/log.hpp"

namespace stoke::detail {
namespace {

// The prefetcher's device normalize for uint8 batches: the loader's affine
// normalization (pixel * scale + bias) as (x / 255 - mean) / std.
DeviceNormalize device_normalize_for(const PreprocessOptions& pre, Toggle jit) {
  DeviceNormalize dn;
  dn.enabled = true;
  dn.jit = jit != Toggle::kOff;
  dn.height = pre.height;
  dn.width = pre.width;
  dn.channels = pre.channels;
  for (int c = 0; c < pre.channels; ++c) {
    float scale = 1.0f, bias = 0.0f;
    pre.normalization.affine(c, scale, bias);
    const float std_dev = 1.0f / (255.0f * scale);
    dn.std[static_cast<std::size_t>(c)] = std_dev;
    dn.mean[static_cast<std::size_t>(c)] = -bias * std_dev;
  }
  return dn;
}

}  // namespace

PrefetchOptions prefetch_options(const Settings& settings, const Loader& loader,
                                 std::uint64_t epoch, std::uint64_t max_batches, GpuBackend* gpu,
                                 std::uint64_t first_batch) {
  PrefetchOptions po = PrefetchOptions::from_settings(settings);
  po.sample_bytes = loader.sample_bytes();
  po.batch_size = loader.batch_size();
  std::uint64_t batches = loader.batches_per_epoch();
  if (max_batches > 0) batches = std::min<std::uint64_t>(batches, max_batches);
  po.batches_per_epoch = batches - std::min(batches, first_batch);
  po.first_epoch = epoch;
  po.epochs = 1;
  po.device = gpu ? gpu->device() : -1;
  if (gpu) po.compute_stream = gpu->compute_stream();
  po.device_memory = gpu;  // the device slots count against the pool's cap
  if (loader.dtype() == OutputDtype::kUint8)
    po.device_normalize = device_normalize_for(loader.options().preprocess, settings.gpu_jit);
  return po;
}

void open_prefetcher(std::optional<Prefetcher>& ring, const PrefetchOptions& po, Loader& loader,
                     const Backend& backend, std::uint64_t first_batch, PrefetchRings* rings) {
  FillBatch fill = [&loader, first_batch](std::uint64_t e, std::uint64_t b,
                                          std::span<std::byte> images,
                                          std::span<std::int32_t> labels) {
    return loader.fill_batch(e, first_batch + b, images, labels);
  };
  const auto* source = dynamic_cast<const PrefetchDeviceSource*>(&backend);
  if (rings) {
    std::shared_ptr<CudaDevice> device;
    if (po.device >= 0) device = source ? source->prefetch_device() : open_cuda_device(po.device);
    ring.emplace(po, std::move(fill), rings->acquire(po, std::move(device)));
  } else if (po.device >= 0 && source) {
    ring.emplace(po, std::move(fill), source->prefetch_device());
  } else {
    ring.emplace(po, std::move(fill));
  }
}

void copy_batch_in(Backend& backend, const Batch& batch, Tensor& x, Tensor& labels) {
  if (batch.device_images()) {
    backend.copy(x.raw(), batch.device_images(), x.bytes(), CopyKind::kDeviceToDevice);
    backend.copy(labels.raw(), batch.device_labels(), labels.bytes(), CopyKind::kDeviceToDevice);
  } else {
    x.copy_from_host(batch.images().data());
    labels.copy_from_host(batch.labels().data());
  }
}

MemoryFigures memory_figures(const Backend& backend, GpuBackend* gpu,
                             const PrefetchStats& prefetch) {
  MemoryFigures m;
  if (gpu) {
    const PoolStats pool = gpu->pool_stats();
    m.device_total = gpu->device_memory_bytes();
    m.pool_cap = pool.cap;
    m.pool_reserved = pool.reserved;
    m.pool_in_use = pool.in_use;
    m.pool_peak = pool.peak_in_use;
    const std::uint64_t used = gpu->device_used_bytes();
    m.device_outside_pool = used > pool.reserved ? used - pool.reserved : 0;
  } else {
    const MemoryStats stats = backend.memory_stats();
    m.pool_in_use = stats.in_use_bytes;
    m.pool_peak = stats.peak_bytes;
  }
  m.pinned_bytes = prefetch.staging.pinned_bytes;
  m.pinned_fallback = prefetch.staging.fell_back;
  return m;
}

float read_scalar(const Tensor& t) {
  float v = 0;
  t.copy_to_host(&v);
  return v;
}

DeviceBusySpan::DeviceBusySpan(GpuBackend* gpu, Profiler& profiler)
    : gpu_(gpu), profiler_(profiler) {
  if (gpu_) gpu_->begin_busy();
}

void DeviceBusySpan::end() noexcept {
  if (!gpu_) return;
  GpuBackend* gpu = std::exchange(gpu_, nullptr);
  try {
    gpu->end_busy();
    profiler_.add_device_busy(gpu->take_busy_seconds(false));
  } catch (const std::exception& e) {
    log_warn(std::string("device-busy timing failed: ") + e.what());
  }
}

}  // namespace stoke::detail
