// Fixtures shared by the fuzz targets and the corpus generator, so a corpus
// file made by make_corpus.cpp fits the target that reads it (the checkpoint's
// model, the cache file's dataset key and sizes).
#pragma once

#include <filesystem>
#include <vector>

#include "fuzz_util.hpp"
#include "stoke/data.hpp"
#include "stoke/nn.hpp"

namespace stoke::fuzz {

inline nn::ModelSpec tiny_spec() {
  nn::ModelSpec s;
  s.height = s.width = 8;
  s.stem_width = 2;
  s.widths = {2, 4};
  s.strides = {1, 2};
  s.blocks_per_stage = 1;
  s.classes = 3;
  return s;
}

// 4 gray 8x8 images (labels 0, 1, 0, 1) as an IDX pair in `dir`.
inline Dataset tiny_idx_dataset(const std::filesystem::path& dir) {
  std::vector<std::uint8_t> images = {0, 0, 8, 3, 0, 0, 0, 4, 0, 0, 0, 8, 0, 0, 0, 8};
  for (int i = 0; i < 4 * 64; ++i) images.push_back(static_cast<std::uint8_t>(i * 7));
  const std::vector<std::uint8_t> labels = {0, 0, 8, 1, 0, 0, 0, 4, 0, 1, 0, 1};
  write_bytes(dir / "cache_images.idx", images.data(), images.size());
  write_bytes(dir / "cache_labels.idx", labels.data(), labels.size());
  return Dataset::from_idx(dir / "cache_images.idx", dir / "cache_labels.idx");
}

// A one-batch loader over tiny_idx_dataset with its file cache at `cache`.
inline LoaderOptions cache_loader_options(const std::filesystem::path& cache) {
  LoaderOptions options;
  options.preprocess.width = options.preprocess.height = 8;
  options.preprocess.channels = 1;
  options.batch_size = 4;
  options.shuffle = false;
  options.max_in_flight = 2;
  options.simd = SimdLevel::kScalar;
  options.cache = CacheSpec{CacheSpec::Kind::kFile, 0, cache.string()};
  return options;
}

// The images a manifest in the scratch folder names: a.jpg, b.png, bad.jpg.
inline void write_manifest_images(const std::filesystem::path& dir) {
  Image img;
  synthetic_inspection_image(12, 10, 1, true, img);
  write_file(dir / "a.jpg", encode_jpeg(img.view(), 80));
  write_file(dir / "b.png", encode_png(img.view()));
  const std::uint8_t bad[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F'};
  write_file(dir / "bad.jpg", bad);
}

}  // namespace stoke::fuzz
