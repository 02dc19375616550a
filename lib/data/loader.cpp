// The Loader: one tbb::parallel_pipeline per batch on the library arena,
//   serial: pick the next sample of the batch (epoch permutation)
//   parallel: cache lookup, else read the file into the token's reused buffer
//   parallel: decode (JPEG at the smallest DCT scale covering the resize
//             target) -> resize -> cache; crop/flip/jitter from a per-sample
//             seed -> normalize + CHW + dtype into the sample's slot
// With a float output, 16-bit samples stay 16-bit through every stage (the
// stage, cache and augmentation at Dataset::bit_depth); uint8 output reduces them.
// Tokens bound the images in flight. Every per-sample decision depends only on
// (seed, epoch, sample), and each sample writes only its own slot, so a batch
// is byte-identical for any thread count. Per-thread workers keep decoder,
// resampler and image buffers, so steady state allocates nothing per image.
#include <tbb/parallel_pipeline.h>

#include "data/loader_impl.hpp"

namespace stoke {

using data_detail::cache_key;
using data_detail::Rng;
using data_detail::Token;

Loader::Loader(Dataset dataset, LoaderOptions options) {
  const auto& pre = options.preprocess;
  if (pre.width <= 0 || pre.height <= 0 || (pre.channels != 1 && pre.channels != 3)) {
    throw InvalidArgument(
        "stoke::Loader: output must be positive width/height and 1 or 3 channels, got " +
        std::to_string(pre.width) + "x" + std::to_string(pre.height) + "x" +
        std::to_string(pre.channels));
  }
  if (options.batch_size == 0)
    throw InvalidArgument("stoke::Loader: batch_size must be at least 1");
  if (options.shard_count < 1 || options.shard_index < 0 ||
      options.shard_index >= options.shard_count) {
    throw InvalidArgument("stoke::Loader: shard " + std::to_string(options.shard_index) + " of " +
                          std::to_string(options.shard_count) +
                          " does not exist (0 <= shard_index < shard_count)");
  }
  const int rw = pre.resize_width ? pre.resize_width : pre.width;
  const int rh = pre.resize_height ? pre.resize_height : pre.height;
  if (rw < pre.width || rh < pre.height) {
    throw InvalidArgument("stoke::Loader: resize target " + std::to_string(rw) + "x" +
                          std::to_string(rh) + " is smaller than the output " +
                          std::to_string(pre.width) + "x" + std::to_string(pre.height) +
                          " it is cropped to");
  }
  for (int c = 0; c < pre.channels; ++c) {
    float s, b;
    pre.normalization.affine(c, s, b);  // validates
  }
  const SimdLevel level = options.simd ? *options.simd : options.context.simd();
  impl_ = std::make_unique<Impl>(level);
  auto& s = *impl_;
  s.max_pixels = options.max_image_pixels ? *options.max_image_pixels
                                          : options.context.settings().max_image_pixels.value_or(0);
  s.channels = pre.channels;
  s.width = pre.width;
  s.height = pre.height;
  s.resize_width = rw;
  s.resize_height = rh;
  // A cache entry holds a sample at its stage depth: 2 bytes per value when
  // any sample is staged at 16 bits (8-bit samples then use the first half).
  s.keep_16_bit = pre.dtype != OutputDtype::kUint8;
  std::size_t stage_sample_bytes = 1;
  for (std::size_t i = 0; s.keep_16_bit && i < dataset.size(); ++i) {
    if (dataset.bit_depth(i) == 16) {
      stage_sample_bytes = 2;
      break;
    }
  }
  s.entry_bytes = static_cast<std::size_t>(rw) * rh * pre.channels * stage_sample_bytes;
  s.sample_bytes =
      static_cast<std::size_t>(pre.width) * pre.height * pre.channels * dtype_size(pre.dtype);
  const CacheSpec spec = options.cache ? *options.cache : options.context.settings().cache;
  try {
    s.cache = data_detail::SampleCache::create(spec, dataset.size(), s.entry_bytes,
                                               cache_key(dataset, pre, rw, rh, stage_sample_bytes));
  } catch (const std::bad_alloc&) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(dataset.size()) * s.entry_bytes;
    throw OutOfMemory("stoke::Loader: cannot allocate the RAM cache for " +
                          std::to_string(dataset.size()) + " samples of " +
                          std::to_string(s.entry_bytes) +
                          " bytes (set STOKE_CACHE=ram:SIZE, "
                          "file:PATH or off)",
                      bytes, spec.ram_budget, 0);
  }
  s.direct = !s.cache && !options.augment.enabled() && rw == pre.width && rh == pre.height;
  const std::size_t in_flight = options.max_in_flight
                                    ? options.max_in_flight
                                    : static_cast<std::size_t>(2 * options.context.cpu_threads());
  s.tokens.resize(std::max<std::size_t>(1, in_flight));
  if (!options.skip_corrupt) options.skip_corrupt = dataset.skip_corrupt();
  s.dataset = std::move(dataset);
  s.options = std::move(options);
}

Loader::~Loader() = default;
Loader::Loader(Loader&&) noexcept = default;
Loader& Loader::operator=(Loader&&) noexcept = default;

std::size_t Loader::batches_per_epoch() const noexcept {
  const std::size_t b = impl_->options.batch_size;
  std::size_t n = impl_->dataset.size();  // the balanced sampler draws as many
  if (impl_->options.shard_count > 1) n = impl_->shard_positions_for(n).size();
  return impl_->options.drop_last ? n / b : (n + b - 1) / b;
}
std::size_t Loader::batch_size() const noexcept {
  return impl_->options.batch_size;
}
std::size_t Loader::sample_bytes() const noexcept {
  return impl_->sample_bytes;
}
std::array<std::size_t, 4> Loader::output_shape() const noexcept {
  return {impl_->options.batch_size, static_cast<std::size_t>(impl_->channels),
          static_cast<std::size_t>(impl_->height), static_cast<std::size_t>(impl_->width)};
}
OutputDtype Loader::dtype() const noexcept {
  return impl_->options.preprocess.dtype;
}
const LoaderOptions& Loader::options() const noexcept {
  return impl_->options;
}
SimdLevel Loader::simd() const noexcept {
  return impl_->level;
}
const Dataset& Loader::dataset() const noexcept {
  return impl_->dataset;
}

LoaderStats Loader::stats() const {
  LoaderStats st;
  st.decoded = impl_->decoded_count.load();
  st.worker_threads = impl_->workers.size();
  st.cache_hits = impl_->hits.load();
  if (impl_->cache) {
    st.cache_entries = impl_->cache->entries();
    st.cache_bytes = impl_->cache->bytes();
    st.cache_file_reused = impl_->cache->reused();
    st.cache_note = impl_->cache->note();
  }
  std::lock_guard lock(impl_->corrupt_mutex);
  for (const auto& [index, reason] : impl_->corrupt)
    st.corrupt.push_back({impl_->dataset.path(index), reason});
  st.corrupt_budget_exceeded = impl_->budget_exceeded;
  return st;
}

std::size_t Loader::fill_batch(std::uint64_t epoch, std::uint64_t batch_index,
                               std::span<std::byte> images, std::span<std::int32_t> labels) {
  auto& s = *impl_;
  std::lock_guard call_lock(s.call_mutex);
  const std::size_t batch = s.options.batch_size;
  if (batch_index >= batches_per_epoch()) {
    throw InvalidArgument("Loader::fill_batch: batch " + std::to_string(batch_index) +
                          " out of range (" + std::to_string(batches_per_epoch()) +
                          " batches per epoch)");
  }
  if (images.size() < batch * s.sample_bytes || labels.size() < batch) {
    throw InvalidArgument("Loader::fill_batch: buffers too small: images " +
                          std::to_string(images.size()) + " bytes (need " +
                          std::to_string(batch * s.sample_bytes) + "), labels " +
                          std::to_string(labels.size()) + " (need " + std::to_string(batch) + ")");
  }
  if (reinterpret_cast<std::uintptr_t>(images.data()) % dtype_size(s.options.preprocess.dtype) !=
      0) {
    throw InvalidArgument("Loader::fill_batch: image buffer is not aligned to its element size");
  }
  s.prepare_order(epoch);
  const std::size_t first = batch_index * batch;
  const std::size_t count = std::min(batch, s.order.size() - first);
  s.free_tokens.clear();
  for (auto& t : s.tokens) s.free_tokens.push_back(&t);
  std::size_t next = 0;
  // Orders the stages of each token and the call's return for TSan (oneTBB
  // orders them already; see core/task_order.hpp).
  detail::TaskOrder& order = detail::arena_order();
  order.publish();
  detail::TaskOrder::ObserveOnExit on_exit(order);
  const auto pipeline = [&] {
    tbb::parallel_pipeline(
        s.tokens.size(),
        tbb::make_filter<void, Token*>(tbb::filter_mode::serial_in_order,
                                       [&](tbb::flow_control& fc) -> Token* {
                                         detail::TaskOrder::Scope scope(detail::arena_order());
                                         if (next >= count) {
                                           fc.stop();
                                           return nullptr;
                                         }
                                         Token* t;
                                         {
                                           std::lock_guard lock(s.free_mutex);
                                           t = s.free_tokens.back();
                                           s.free_tokens.pop_back();
                                         }
                                         t->slot = next;
                                         t->position = first + next;
                                         t->index = s.order[first + next];
                                         ++next;
                                         return t;
                                       }) &
            tbb::make_filter<Token*, Token*>(tbb::filter_mode::parallel,
                                             [&](Token* t) {
                                               detail::TaskOrder::Scope scope(
                                                   detail::arena_order());
                                               t->fetched = false;
                                               try {
                                                 s.fetch(*t);
                                                 t->fetched = true;
                                               } catch (const Error&) {
                                                 if (!*s.options.skip_corrupt) throw;
                                               }
                                               return t;
                                             }) &
            tbb::make_filter<Token*, void>(tbb::filter_mode::parallel, [&](Token* t) {
              detail::TaskOrder::Scope scope(detail::arena_order());
              s.fill_slot(s.workers.local(), *t, t->fetched,
                          images.data() + t->slot * s.sample_bytes, labels[t->slot]);
              std::lock_guard lock(s.free_mutex);
              s.free_tokens.push_back(t);
            }));
  };
  // In the loader's context's arena, whichever thread calls (the prefetcher's).
  s.options.context.run([&] { run_in_arena(pipeline); });
  if (*s.options.skip_corrupt) s.check_corrupt_budget();
  return count;
}

}  // namespace stoke
