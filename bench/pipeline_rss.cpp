// Peak resident memory of a Loader pass over N synthetic JPEGs (cache off):
// it should stay flat as N grows, bounded by the images in flight.
//   stoke_bench_pipeline_rss [count=2000] [width=1224] [height=1024]
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "stoke/data.hpp"

int main(int argc, char** argv) {
  using namespace stoke;
  const std::size_t count = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 2000;
  SyntheticOptions synth;
  synth.width = argc > 2 ? std::atoi(argv[2]) : 1224;
  synth.height = argc > 3 ? std::atoi(argv[3]) : 1024;
  const char* env = std::getenv("STOKE_BENCH_DATA");
  const auto root = std::filesystem::path(env ? env : STOKE_BENCH_BINARY_DIR "/bench_data") /
                    ("rss_" + std::to_string(synth.width) + "x" + std::to_string(synth.height) +
                     "_" + std::to_string(count));
  if (!std::filesystem::exists(root / "ok")) {
    // Generate, then measure in a fresh process: ru_maxrss is a high-water mark
    // and generation holds full-size images.
    write_synthetic_dataset(root, count, synth);
    execv("/proc/self/exe", argv);
    std::perror("execv");
    return 1;
  }
  const Dataset dataset = Dataset::from_folder(root);
  LoaderOptions o;
  o.preprocess.width = o.preprocess.height = 512;
  o.batch_size = 32;
  o.cache = CacheSpec{};
  Loader loader(dataset, o);
  std::vector<std::byte> images(loader.batch_size() * loader.sample_bytes());
  std::vector<std::int32_t> labels(loader.batch_size());
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t done = 0;
  for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b)
    done += loader.fill_batch(0, b, images, labels);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  std::printf(
      "images %zu (%dx%d JPEG q90), batch %zu, %.1f img/s, peak RSS before pass %.1f MiB, after "
      "%.1f MiB\n",
      done, synth.width, synth.height, loader.batch_size(), done / seconds,
      before.ru_maxrss / 1024.0, after.ru_maxrss / 1024.0);
  return 0;
}
