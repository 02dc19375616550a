// Writes stoke's files in a loop until it is killed, for the crash-safety
// test (tests/unit/crash_safe_files_test.cpp):
//   crash_writer checkpoint <path>          saves models of seeds 1 and 2 in turn
//   crash_writer cache <dataset> <cache>     rebuilds a file cache over and over
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  stoke::set_thread_count(1);
  if (mode == "checkpoint") {
    stoke::nn::ModelSpec spec;
    spec.architecture = stoke::nn::Architecture::kPlainCnn;
    spec.widths = {8, 16};
    auto a = stoke::nn::build_model(stoke::cpu_backend(), spec, 1);
    auto b = stoke::nn::build_model(stoke::cpu_backend(), spec, 2);
    std::puts("ready");
    std::fflush(stdout);
    for (unsigned long i = 0;; ++i) stoke::nn::save_checkpoint(argv[2], i % 2 ? *b : *a, nullptr);
  }
  if (mode == "cache" && argc >= 4) {
    const auto data = stoke::Dataset::from_folder(argv[2]);
    stoke::LoaderOptions options;
    options.preprocess.width = 32;
    options.preprocess.height = 24;
    options.batch_size = 4;
    options.shuffle = false;
    options.cache = stoke::CacheSpec{stoke::CacheSpec::Kind::kFile, 0, argv[3]};
    std::vector<std::byte> images(4 * 3 * 32 * 24 * 4);
    std::vector<std::int32_t> labels(4);
    std::puts("ready");
    std::fflush(stdout);
    for (;;) {
      std::filesystem::remove(argv[3]);
      stoke::Loader loader(data, options);
      for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b)
        loader.fill_batch(0, b, images, labels);
    }
  }
  return 2;
}
