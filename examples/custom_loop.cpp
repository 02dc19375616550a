// A custom trainer that uses stoke only for its input side: the Loader
// (decode, preprocess, cache, augment on the library's arena) behind the
// Prefetcher (batches prepared while the step runs), and its own step.
//
//   custom_loop <root> [steps]
#include <cstdio>
#include <cstdlib>

#include "stoke/stoke.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <root> [steps]\n", argv[0]);
    return 2;
  }
  try {
    const auto runtime = stoke::init();
    auto data = stoke::Dataset::from_folder(argv[1]);
    stoke::LoaderOptions options;
    options.preprocess.width = options.preprocess.height = 96;
    options.batch_size = 16;
    options.context = runtime.context;  // STOKE_CACHE, SIMD level and arena from init()
    stoke::Loader loader(data, options);

    auto prefetch = stoke::PrefetchOptions::from_settings(runtime.config.settings());
    prefetch.sample_bytes = loader.sample_bytes();
    prefetch.batch_size = loader.batch_size();
    prefetch.batches_per_epoch = loader.batches_per_epoch();
    prefetch.epochs = 3;
    stoke::Prefetcher prefetcher(
        prefetch, [&loader](std::uint64_t epoch, std::uint64_t batch, std::span<std::byte> images,
                            std::span<std::int32_t> labels) {
          return loader.fill_batch(epoch, batch, images, labels);
        });

    const long max_steps = argc > 2 ? std::atol(argv[2]) : 20;
    long steps = 0;
    double checksum = 0;
    while (auto batch = prefetcher.next()) {
      // Your step here: the batch is (count, 3, 96, 96) float32 in batch->images().
      const auto* pixels = reinterpret_cast<const float*>(batch->images().data());
      for (std::size_t i = 0; i < batch->count(); ++i) checksum += pixels[i * 3 * 96 * 96];
      batch->release();  // hands the slot back to the producer
      if (++steps == max_steps) break;
    }
    prefetcher.stop();
    std::printf("%ld batches, checksum %.3f\n%s", steps, checksum,
                stoke::format_prefetch_stats(prefetcher.stats()).c_str());
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "custom_loop: %s\n", e.what());
    return 1;
  }
}
