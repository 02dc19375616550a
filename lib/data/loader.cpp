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
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <numeric>

#include "core/task_order.hpp"
#include "data/cache.hpp"
#include "data/rng.hpp"
#include "data/sampler.hpp"
#include "image/file_read.hpp"
#include "image/stage_format.hpp"
#include "stoke/data.hpp"
#include "stoke/distributed.hpp"
#include "stoke/error.hpp"
#include "stoke/profile.hpp"
#include "stoke/threads.hpp"

namespace stoke {
namespace {

using data_detail::Rng;

struct Token {
  std::size_t slot = 0;      // position in the batch
  std::size_t position = 0;  // position in the epoch order
  std::size_t index = 0;     // dataset index (of a replacement, after a corrupt sample)
  const std::uint8_t* cached = nullptr;
  bool fetched = false;             // the read stage fetched `index`
  std::vector<std::uint8_t> bytes;  // file contents, reused
};

struct Worker {
  explicit Worker(SimdLevel level) : resampler(level) {}
  Decoder decoder;
  Resampler resampler;
  Image decoded;
  Image deepened;  // a source at the stage's bit depth (convert_depth)
  Image converted;
  Image resized;
  Image augmented;
};

std::uint64_t cache_key(const Dataset& dataset, const PreprocessOptions& p, int rw, int rh,
                        std::size_t sample_bytes) {
  // Everything that determines the cached bytes, plus a format tag (2: JPEGs
  // are turned upright by their EXIF orientation since issue 15).
  const std::int64_t fields[] = {2,
                                 rw,
                                 rh,
                                 p.channels,
                                 static_cast<int>(p.filter),
                                 p.dct_scaling ? 1 : 0,
                                 static_cast<std::int64_t>(sample_bytes)};
  return data_detail::fnv1a(fields, sizeof fields, dataset.fingerprint());
}

}  // namespace

struct Loader::Impl {
  Dataset dataset;
  LoaderOptions options;
  SimdLevel level = SimdLevel::kScalar;
  int channels = 3, width = 0, height = 0;  // output
  int resize_width = 0, resize_height = 0;  // deterministic stage
  // Float outputs carry 16-bit samples at 16 bits (decode, stage, cache,
  // augmentation); a uint8 output reduces them to 8 bits.
  bool keep_16_bit = false;
  std::size_t entry_bytes = 0;
  std::size_t sample_bytes = 0;
  bool direct = false;  // no cache, no augmentation, no crop: decode -> fused pass -> slot
  std::unique_ptr<data_detail::SampleCache> cache;
  tbb::enumerable_thread_specific<Worker> workers;
  std::vector<Token> tokens;
  std::vector<Token*> free_tokens;
  std::mutex free_mutex;
  std::mutex call_mutex;  // serializes fill_batch callers (the contract is one at a time)
  std::vector<std::size_t> order;
  std::uint64_t order_epoch = ~0ull;
  std::atomic<std::uint64_t> decoded_count{0};
  std::atomic<std::uint64_t> hits{0};
  std::uint64_t max_pixels = kDefaultMaxImagePixels;
  std::mutex corrupt_mutex;
  std::map<std::size_t, std::string> corrupt;  // dataset index -> reason (skip_corrupt)
  std::atomic<std::size_t> corrupt_count{0};
  bool budget_exceeded = false;

  explicit Impl(SimdLevel lvl) : level(lvl), workers([lvl] { return Worker(lvl); }) {}

  void prepare_order(std::uint64_t epoch) {
    if (order_epoch == epoch) return;
    if (options.balanced_sampler) {
      order = data_detail::balanced_order(dataset, options.seed, epoch);
      shard_order();
      order_epoch = epoch;
      return;
    }
    order.resize(dataset.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (options.shuffle)
      Rng(data_detail::hash_seed(options.seed, epoch, 0x5AFF1E))
          .shuffle(order.begin(), order.end());
    shard_order();
    order_epoch = epoch;
  }

  // This rank's part of the epoch's order (data-parallel training).
  void shard_order() {
    if (options.shard_count <= 1) return;
    const auto positions = shard_positions_for(order.size());
    std::vector<std::size_t> mine(positions.size());
    for (std::size_t i = 0; i < positions.size(); ++i) mine[i] = order[positions[i]];
    order = std::move(mine);
  }

  std::vector<std::size_t> shard_positions_for(std::size_t samples) const {
    return options.shard_whole_steps ? shard_positions(samples, options.batch_size,
                                                       options.shard_index, options.shard_count)
                                     : cover_positions(samples, options.batch_size,
                                                       options.shard_index, options.shard_count);
  }

  // The depth sample `index` is staged, cached and augmented at.
  int stage_depth(std::size_t index) const { return keep_16_bit ? dataset.bit_depth(index) : 8; }

  // The deterministic stage into `out` (rw x rh x C at stage_depth, tightly packed).
  void deterministic(Worker& w, const Token& t, MutableImageView out) {
    ImageView source;
    if (dataset.in_memory()) {
      source = dataset.pixels(t.index);
    } else {
      Profiler::Span span(options.profiler, Stage::kDecode);
      w.decoder.decode(t.bytes, dataset.file(t.index), decode_options(resize_width, resize_height),
                       w.decoded);
      source = w.decoded.view();
      decoded_count.fetch_add(1, std::memory_order_relaxed);
    }
    Profiler::Span span(options.profiler, Stage::kPreprocess);
    // Depth differs for Mono16 with a uint8 output, or a file changed since load.
    source =
        image_detail::to_stage_format(source, channels, out.bit_depth, w.deepened, w.converted);
    w.resampler.resize(source, out, options.preprocess.filter);
  }

  // JPEG decodes at the smallest DCT scale still covering (w, h), unless the
  // options ask for full-size decoding (the baseline of stoke-bench).
  DecodeOptions decode_options(int w, int h) const {
    DecodeOptions d = options.preprocess.dct_scaling ? DecodeOptions{channels, w, h}
                                                     : DecodeOptions{channels, 0, 0};
    d.max_pixels = max_pixels;
    d.keep_16_bit = keep_16_bit;
    return d;
  }

  // Cache lookup, else the file's bytes into the token.
  void fetch(Token& t) {
    if (cache) {
      Profiler::Span span(options.profiler, Stage::kCache);
      t.cached = cache->find(t.index);
    } else {
      t.cached = nullptr;
    }
    if (t.cached) {
      hits.fetch_add(1, std::memory_order_relaxed);
    } else if (!dataset.in_memory()) {
      Profiler::Span span(options.profiler, Stage::kRead);
      detail::read_regular_file(dataset.file(t.index).c_str(), t.bytes);
    }
  }

  bool known_corrupt(std::size_t index) {
    if (corrupt_count.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard lock(corrupt_mutex);
    return corrupt.count(index) != 0;
  }

  // Fills the token's slot from its sample; with skip_corrupt a sample that
  // fails is recorded and the next one in the epoch order is tried. The
  // outcome depends only on which files are corrupt, not on timing. `fetched`:
  // the read stage already fetched t.index.
  void fill_slot(Worker& w, Token& t, bool fetched, std::byte* slot, std::int32_t& label) {
    const std::size_t n = order.size();  // this rank's shard in data-parallel runs
    for (std::size_t attempt = 0; attempt < n; ++attempt) {
      t.index = order[(t.position + attempt) % n];
      if (known_corrupt(t.index)) continue;
      try {
        if (attempt > 0 || !fetched) fetch(t);
        process(w, t, slot);
        label = dataset.label(t.index);
        return;
      } catch (const std::bad_alloc&) {
        throw DecodeError("cannot load image '" + dataset.path(t.index) + "': out of memory");
      } catch (const Error& e) {
        if (!options.skip_corrupt || (e.code() != ErrorCode::kDecode && e.code() != ErrorCode::kIo))
          throw;
        std::lock_guard lock(corrupt_mutex);
        if (corrupt.emplace(t.index, e.what()).second)
          corrupt_count.fetch_add(1, std::memory_order_release);
      }
    }
    throw DecodeError("dataset " + dataset.report().source + ": no sample could be decoded (all " +
                      std::to_string(n) + " are corrupt)");
  }

  // After a batch: the budget of corrupt samples (deterministic: the set found
  // by the end of a batch does not depend on timing).
  void check_corrupt_budget() {
    const std::size_t found = corrupt_count.load(std::memory_order_acquire);
    const auto by_fraction = static_cast<std::size_t>(options.max_corrupt_fraction *
                                                      static_cast<double>(dataset.size()));
    const std::size_t budget = std::max(options.max_corrupt_samples, by_fraction);
    if (found <= budget) return;
    budget_exceeded = true;
    std::string list;
    std::lock_guard lock(corrupt_mutex);
    for (const auto& [index, reason] : corrupt) list += "\n  " + reason;
    throw DecodeError("dataset " + dataset.report().source + ": too many corrupt samples (" +
                      std::to_string(found) + " of " + std::to_string(dataset.size()) +
                      ", budget " + std::to_string(budget) +
                      " = max(max_corrupt_samples, max_corrupt_fraction * size)):" + list);
  }

  void process(Worker& w, const Token& t, std::byte* slot) {
    const auto& pre = options.preprocess;
    if (direct && !dataset.in_memory()) {
      {
        Profiler::Span span(options.profiler, Stage::kDecode);
        w.decoder.decode(t.bytes, dataset.file(t.index), decode_options(width, height), w.decoded);
      }
      decoded_count.fetch_add(1, std::memory_order_relaxed);
      Profiler::Span span(options.profiler, Stage::kPreprocess);
      if (pre.dtype == OutputDtype::kUint8) {
        MutableImageView out{reinterpret_cast<std::uint8_t*>(slot), width, height, channels,
                             static_cast<std::size_t>(width) * channels};
        w.resampler.resize(w.decoded.view(), out, pre.filter);  // decoded with `channels`
        return;
      }
      w.resampler.resize_normalize_chw(w.decoded.view(), width, height, pre.filter,
                                       pre.normalization, pre.dtype, slot);
      return;
    }
    ImageView stage;
    const int depth = stage_depth(t.index);
    const std::size_t stride =
        static_cast<std::size_t>(resize_width) * channels * (depth == 16 ? 2 : 1);
    if (t.cached) {
      stage = {t.cached, resize_width, resize_height, channels, stride, depth};
    } else {
      std::uint8_t* target = cache ? cache->reserve(t.index) : nullptr;
      if (!target) {
        w.resized.reshape(resize_width, resize_height, channels, depth);
        target = w.resized.data();
      }
      deterministic(w, t, {target, resize_width, resize_height, channels, stride, depth});
      if (cache && target != w.resized.data()) {
        Profiler::Span span(options.profiler, Stage::kCache);
        cache->commit(t.index);
      }
      stage = {target, resize_width, resize_height, channels, stride, depth};
    }
    const auto& aug = options.augment;
    ImageView view = center_crop(stage, width, height);
    if (aug.enabled()) {
      Profiler::Span span(options.profiler, Stage::kAugment);
      // Fixed draw order, whatever is enabled, so each stream is stable.
      Rng rng(data_detail::hash_seed(options.seed, order_epoch, t.index ^ 0xA0A0A0A0ull));
      const std::uint64_t crop_seed = rng.next();
      const bool hflip = rng.unit() < aug.hflip_probability;
      const bool vflip = rng.unit() < aug.vflip_probability;
      const float brightness = aug.brightness * (2.f * rng.unit() - 1.f);
      const float contrast = 1.f + aug.contrast * (2.f * rng.unit() - 1.f);
      if (aug.random_crop) view = random_crop(stage, width, height, crop_seed);
      if (hflip || vflip || aug.brightness > 0 || aug.contrast > 0) {
        w.augmented.reshape(width, height, channels, view.bit_depth);
        for (int y = 0; y < height; ++y) {
          std::memcpy(w.augmented.data() + y * w.augmented.stride(), view.row(y),
                      w.augmented.stride());
        }
        auto m = w.augmented.mutable_view();
        if (hflip) flip_horizontal(m);
        if (vflip) flip_vertical(m);
        if (aug.brightness > 0 || aug.contrast > 0)
          adjust_brightness_contrast(m, brightness, contrast, level);
        view = w.augmented.view();
      }
    }
    Profiler::Span span(options.profiler, Stage::kBatchAssembly);
    if (pre.dtype == OutputDtype::kUint8) {
      // The (cropped, augmented) pixels as they are: the consumer normalizes.
      const std::size_t row = static_cast<std::size_t>(width) * channels;
      auto* out = reinterpret_cast<std::uint8_t*>(slot);
      for (int y = 0; y < height; ++y) std::memcpy(out + y * row, view.row(y), row);
      return;
    }
    w.resampler.resize_normalize_chw(view, width, height, pre.filter, pre.normalization, pre.dtype,
                                     slot);
  }
};

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
                                                 if (!s.options.skip_corrupt) throw;
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
  if (s.options.skip_corrupt) s.check_corrupt_budget();
  return count;
}

}  // namespace stoke
