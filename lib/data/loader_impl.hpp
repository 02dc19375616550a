// Loader::Impl: the loader's state and its per-sample stages (order, fetch,
// decode, stage, cache, augmentation, the slot's fused pass), used by
// loader.cpp's fill_batch pipeline. Private to lib/data.
#pragma once

#include <tbb/enumerable_thread_specific.h>

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
#include "stoke/error.hpp"
#include "stoke/profile.hpp"
#include "stoke/shards.hpp"
#include "stoke/threads.hpp"

namespace stoke {
namespace data_detail {

// One sample in flight through the pipeline.
struct Token {
  std::size_t slot = 0;      // position in the batch
  std::size_t position = 0;  // position in the epoch order
  std::size_t index = 0;     // dataset index (of a replacement, after a corrupt sample)
  const std::uint8_t* cached = nullptr;
  bool fetched = false;             // the read stage fetched `index`
  std::vector<std::uint8_t> bytes;  // file contents, reused
};

// Per-thread decoder, resampler and image buffers (reused: no allocation per
// image in steady state).
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

inline std::uint64_t cache_key(const Dataset& dataset, const PreprocessOptions& p, int rw, int rh,
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

}  // namespace data_detail

struct Loader::Impl {
  using Rng = data_detail::Rng;
  using Token = data_detail::Token;
  using Worker = data_detail::Worker;

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
        if (!*options.skip_corrupt ||
            (e.code() != ErrorCode::kDecode && e.code() != ErrorCode::kIo))
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

}  // namespace stoke
