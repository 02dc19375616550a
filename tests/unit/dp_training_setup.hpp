// The small training run both sides of the data-parallel equivalence test
// use: ranks in stoke_dist_worker, the one-process reference in
// distributed_training_test.cpp.
#pragma once

#include <filesystem>
#include <fstream>
#include <vector>

#include "stoke/train.hpp"

namespace stoke::testing {

inline constexpr int kDpSide = 12;
inline constexpr int kDpBatch = 16;  // per rank

inline void dp_training_setup(nn::ModelSpec& spec, LoaderOptions& loader, TrainerOptions& options) {
  loader.preprocess.width = kDpSide;
  loader.preprocess.height = kDpSide;
  loader.preprocess.channels = 1;
  loader.preprocess.normalization =
      Normalization::mean_std(std::vector<float>{0.45f}, std::vector<float>{0.25f});
  loader.cache = CacheSpec{};
  loader.seed = 3;
  spec.architecture = nn::Architecture::kPlainCnn;
  spec.in_channels = 1;
  spec.height = kDpSide;
  spec.width = kDpSide;
  spec.classes = 2;
  spec.widths = {8};
  options.epochs = 2;
  options.batch_size = kDpBatch;
  options.log_every_steps = 0;
  options.schedule.base_lr = 0.05f;
  Config config;
  config.set("STOKE_PREFETCH_DEPTH", "2");
  options.settings = config.settings();
}

inline void write_floats(const std::filesystem::path& path, const Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
}

inline std::vector<float> read_floats(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<std::size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

}  // namespace stoke::testing
