// The Loader: batch layout and labels, epoch permutations, thread-count
// independence, the cache (RAM and file: reuse, invalidation, truncation).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/threads.hpp"

namespace stoke {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  // Per process: CTest runs tests of this binary in parallel processes.
  const fs::path dir =
      fs::path(STOKE_TEST_BINARY_DIR) / "test_tmp" / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Ten 2x2 gray images whose pixels all equal 10 * i, labels i % 3.
Dataset valued_idx(const fs::path& root) {
  std::string images("\0\0\x08\x03\0\0\0\x0a\0\0\0\x02\0\0\0\x02", 16);
  for (int i = 0; i < 10; ++i) images.append(4, static_cast<char>(10 * i));
  std::string labels("\0\0\x08\x01\0\0\0\x0a", 8);
  for (int i = 0; i < 10; ++i) labels.push_back(static_cast<char>(i % 3));
  std::ofstream(root / "i.idx", std::ios::binary) << images;
  std::ofstream(root / "l.idx", std::ios::binary) << labels;
  return Dataset::from_idx(root / "i.idx", root / "l.idx");
}

// A small synthetic JPEG dataset, written once per test binary run.
const Dataset& jpeg_dataset() {
  static const Dataset dataset = [] {
    const fs::path root = fresh_dir("loader_jpeg");
    SyntheticOptions o;
    o.width = 96;
    o.height = 80;
    o.defect_fraction = 0.5;
    o.seed = 11;
    write_synthetic_dataset(root, 10, o);
    return Dataset::from_folder(root);
  }();
  return dataset;
}

CacheSpec no_cache() {
  return CacheSpec{};
}
CacheSpec ram_cache() {
  CacheSpec c;
  c.kind = CacheSpec::Kind::kRam;
  return c;
}
CacheSpec file_cache(const fs::path& path) {
  CacheSpec c;
  c.kind = CacheSpec::Kind::kFile;
  c.path = path.string();
  return c;
}

LoaderOptions augmenting(CacheSpec cache) {
  LoaderOptions o;
  o.preprocess.width = 32;
  o.preprocess.height = 24;
  o.preprocess.resize_width = 40;
  o.preprocess.resize_height = 30;
  const float mean[] = {0.5f, 0.4f, 0.3f}, stdev[] = {0.2f, 0.25f, 0.3f};
  o.preprocess.normalization = Normalization::mean_std(mean, stdev);
  o.augment.random_crop = true;
  o.augment.hflip_probability = 0.5f;
  o.augment.vflip_probability = 0.3f;
  o.augment.brightness = 0.1f;
  o.augment.contrast = 0.2f;
  o.batch_size = 4;
  o.seed = 99;
  o.cache = cache;
  return o;
}

struct Epoch {
  std::vector<std::byte> images;
  std::vector<std::int32_t> labels;
  bool operator==(const Epoch&) const = default;
};

Epoch run_epoch(Loader& loader, std::uint64_t epoch) {
  Epoch out;
  const std::size_t per_batch = loader.batch_size() * loader.sample_bytes();
  std::vector<std::byte> images(per_batch);
  std::vector<std::int32_t> labels(loader.batch_size());
  for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const std::size_t n = loader.fill_batch(epoch, b, images, labels);
    out.images.insert(out.images.end(), images.begin(), images.begin() + n * loader.sample_bytes());
    out.labels.insert(out.labels.end(), labels.begin(), labels.begin() + n);
  }
  return out;
}

class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(thread_count()) {}
  ~ThreadCountGuard() { set_thread_count(saved_); }

 private:
  int saved_;
};

TEST(DataLoader, EveryEpochIsAPermutationWithMatchingLabelsAndAShortLastBatch) {
  LoaderOptions o;
  o.preprocess.width = 2;
  o.preprocess.height = 2;
  o.preprocess.channels = 1;
  o.preprocess.normalization = Normalization::min_max(0.f, 255.f);  // output == pixel value
  o.batch_size = 4;
  o.cache = no_cache();
  Loader loader(valued_idx(fresh_dir("perm")), o);
  EXPECT_EQ(loader.batches_per_epoch(), 3u);
  EXPECT_EQ(loader.sample_bytes(), 16u);
  EXPECT_EQ(loader.output_shape(), (std::array<std::size_t, 4>{4, 1, 2, 2}));
  std::vector<float> images(16);
  std::vector<std::int32_t> labels(4);
  EXPECT_EQ(loader.fill_batch(0, 2, std::as_writable_bytes(std::span(images)), labels), 2u);
  std::vector<int> first_order;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int> order;
    for (std::size_t b = 0; b < 3; ++b) {
      const std::size_t n =
          loader.fill_batch(epoch, b, std::as_writable_bytes(std::span(images)), labels);
      for (std::size_t i = 0; i < n; ++i) {
        const int value = static_cast<int>(std::lround(images[i * 4] / 10.f));
        for (int p = 1; p < 4; ++p) ASSERT_FLOAT_EQ(images[i * 4 + p], images[i * 4]);
        EXPECT_EQ(labels[i], value % 3);
        order.push_back(value);
      }
    }
    std::vector<int> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 10; ++i) ASSERT_EQ(sorted[i], i);
    if (epoch == 0)
      first_order = order;
    else
      EXPECT_NE(order, first_order);  // shuffled per epoch
  }
  EXPECT_THROW(loader.fill_batch(0, 3, std::as_writable_bytes(std::span(images)), labels),
               InvalidArgument);
  std::vector<std::int32_t> few(2);
  EXPECT_THROW(loader.fill_batch(0, 0, std::as_writable_bytes(std::span(images)), few),
               InvalidArgument);
}

TEST(DataLoader, BatchesAreByteIdenticalForOneAndTwoThreads) {
  ThreadCountGuard guard;
  set_thread_count(1);
  Loader one(jpeg_dataset(), augmenting(no_cache()));
  const Epoch a0 = run_epoch(one, 0), a1 = run_epoch(one, 1);
  set_thread_count(2);
  LoaderOptions o = augmenting(no_cache());
  o.max_in_flight = 3;
  Loader two(jpeg_dataset(), o);
  EXPECT_TRUE(run_epoch(two, 1) == a1);
  EXPECT_TRUE(run_epoch(two, 0) == a0);
  EXPECT_FALSE(a0 == a1);  // augmentation and order change per epoch
}

TEST(DataLoader, EverySimdLevelGivesTheSameBatches) {
  LoaderOptions o = augmenting(no_cache());
  o.simd = SimdLevel::kScalar;
  Loader scalar(jpeg_dataset(), o);
  const Epoch expected = run_epoch(scalar, 3);
  for (int l = 1; l <= static_cast<int>(query_cpu().simd); ++l) {
    o.simd = static_cast<SimdLevel>(l);
    Loader simd(jpeg_dataset(), o);
    EXPECT_TRUE(run_epoch(simd, 3) == expected) << to_string(static_cast<SimdLevel>(l));
  }
}

TEST(DataLoader, StokeCpuSimdScalarForcesTheScalarKernels) {
  Config config;
  config.set("STOKE_CPU_SIMD", "scalar");
  LoaderOptions o = augmenting(no_cache());
  o.simd.reset();
  o.context = Context(config);
  EXPECT_EQ(Loader(jpeg_dataset(), o).simd(), SimdLevel::kScalar);
  o.context = Context();
  EXPECT_EQ(Loader(jpeg_dataset(), o).simd(), default_simd_level());
}

TEST(DataLoader, DirectPathMatchesDecodeAndFusedKernel) {
  LoaderOptions o;
  o.preprocess.width = 24;
  o.preprocess.height = 20;
  o.shuffle = false;
  o.batch_size = 3;
  o.cache = no_cache();
  o.simd = SimdLevel::kScalar;
  Loader loader(jpeg_dataset(), o);
  std::vector<float> images(3 * 3 * 20 * 24);
  std::vector<std::int32_t> labels(3);
  loader.fill_batch(0, 0, std::as_writable_bytes(std::span(images)), labels);
  Decoder decoder;
  Image decoded;
  decoder.decode_file(jpeg_dataset().path(1), {3, 24, 20}, decoded);
  std::vector<float> expected(3 * 20 * 24);
  Resampler(SimdLevel::kScalar)
      .resize_normalize_chw(decoded.view(), 24, 20, ResizeFilter::kAuto, o.preprocess.normalization,
                            OutputDtype::kFloat32, expected.data());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), images.begin() + expected.size()));
  EXPECT_EQ(labels[1], jpeg_dataset().label(1));
}

// uint8 output: the resized pixels as they are, interleaved HWC, one byte
// per value (the direct path resizes straight into the slot).
TEST(DataLoader, Uint8OutputIsTheResizedPixelsInHwc) {
  LoaderOptions o;
  o.preprocess.width = 24;
  o.preprocess.height = 20;
  o.preprocess.dtype = OutputDtype::kUint8;
  o.shuffle = false;
  o.batch_size = 3;
  o.cache = no_cache();
  o.simd = SimdLevel::kScalar;
  Loader loader(jpeg_dataset(), o);
  EXPECT_EQ(loader.sample_bytes(), 24u * 20u * 3u);
  std::vector<std::uint8_t> images(3 * loader.sample_bytes());
  std::vector<std::int32_t> labels(3);
  loader.fill_batch(0, 0, std::as_writable_bytes(std::span(images)), labels);
  Decoder decoder;
  Image decoded, expected;
  decoder.decode_file(jpeg_dataset().path(1), {3, 24, 20}, decoded);
  expected.reshape(24, 20, 3);
  Resampler(SimdLevel::kScalar)
      .resize(decoded.view(), expected.mutable_view(), ResizeFilter::kAuto);
  for (int y = 0; y < 20; ++y) {
    ASSERT_TRUE(
        std::equal(expected.view().row(y), expected.view().row(y) + 24 * 3,
                   images.begin() + loader.sample_bytes() + static_cast<std::size_t>(y) * 24 * 3))
        << "row " << y;
  }
}

// Through the cache, crop and augmentation, uint8 output is what the float
// output normalizes: float(c, y, x) = u8(y, x, c) * scale[c] + bias[c].
TEST(DataLoader, Uint8OutputMatchesTheNormalizedOutputBeforeNormalization) {
  LoaderOptions as_float = augmenting(ram_cache()), as_u8 = augmenting(ram_cache());
  as_u8.preprocess.dtype = OutputDtype::kUint8;
  Loader f(jpeg_dataset(), as_float), u(jpeg_dataset(), as_u8);
  const Epoch ef = run_epoch(f, 1), eu = run_epoch(u, 1);
  ASSERT_EQ(eu.labels, ef.labels);
  const int w = 32, h = 24, c = 3;
  const std::size_t samples = ef.labels.size();
  ASSERT_EQ(eu.images.size(), samples * w * h * c);
  const auto* pf = reinterpret_cast<const float*>(ef.images.data());
  const auto* pu = reinterpret_cast<const std::uint8_t*>(eu.images.data());
  double worst = 0;
  for (std::size_t s = 0; s < samples; ++s)
    for (int ch = 0; ch < c; ++ch) {
      float scale = 0, bias = 0;
      as_float.preprocess.normalization.affine(ch, scale, bias);
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const float fv = pf[((s * c + ch) * h + y) * w + x];
          const float uv = pu[((s * h + y) * w + x) * c + ch] * scale + bias;
          worst = std::max(worst, static_cast<double>(std::fabs(fv - uv)));
        }
    }
  EXPECT_LT(worst, 1e-5) << "one multiply-add apart";
}

TEST(DataLoader, RamCacheServesLaterEpochsWithIdenticalContent) {
  Loader cached(jpeg_dataset(), augmenting(ram_cache()));
  Loader uncached(jpeg_dataset(), augmenting(no_cache()));
  EXPECT_TRUE(run_epoch(cached, 0) == run_epoch(uncached, 0));
  const auto decoded = cached.stats().decoded;
  EXPECT_EQ(decoded, 10u);
  EXPECT_TRUE(run_epoch(cached, 1) == run_epoch(uncached, 1));
  EXPECT_EQ(cached.stats().decoded, decoded);  // nothing decoded again
  EXPECT_EQ(cached.stats().cache_hits, 10u);
  EXPECT_EQ(cached.stats().cache_entries, 10u);
}

TEST(DataLoader, RamCacheBudgetBoundsEntries) {
  CacheSpec small = ram_cache();
  small.ram_budget = 40 * 30 * 3 * 4;  // four entries
  Loader loader(jpeg_dataset(), augmenting(small));
  Loader uncached(jpeg_dataset(), augmenting(no_cache()));
  EXPECT_TRUE(run_epoch(loader, 0) == run_epoch(uncached, 0));
  EXPECT_TRUE(run_epoch(loader, 1) == run_epoch(uncached, 1));
  EXPECT_EQ(loader.stats().cache_entries, 4u);
  EXPECT_EQ(loader.stats().cache_hits, 4u);
}

TEST(DataLoader, StokeCacheEnvironmentSelectsTheCacheWhenOptionsLeaveItUnset) {
  const char* previous = std::getenv("STOKE_CACHE");
  const std::string saved = previous ? previous : "";
  ::setenv("STOKE_CACHE", "ram:1M", 1);
  LoaderOptions o = augmenting(no_cache());
  o.cache.reset();
  o.context = Context::from_environment();  // the entry point reads the environment
  Loader loader(jpeg_dataset(), o);
  if (previous)
    ::setenv("STOKE_CACHE", saved.c_str(), 1);
  else
    ::unsetenv("STOKE_CACHE");
  run_epoch(loader, 0);
  // 1 MiB holds 291 entries of 40x30x3: all ten samples.
  EXPECT_EQ(loader.stats().cache_entries, 10u);
}

TEST(DataLoader, FileCacheIsReusedAndRebuiltWhenStaleTruncatedOrCorrupt) {
  const fs::path path = fresh_dir("file_cache") / "cache.bin";
  Loader reference(jpeg_dataset(), augmenting(no_cache()));
  const Epoch expected = run_epoch(reference, 2);
  {
    Loader build(jpeg_dataset(), augmenting(file_cache(path)));
    EXPECT_FALSE(build.stats().cache_file_reused);
    EXPECT_TRUE(run_epoch(build, 2) == expected);
  }
  ASSERT_TRUE(fs::exists(path));
  {
    Loader reuse(jpeg_dataset(), augmenting(file_cache(path)));
    EXPECT_TRUE(reuse.stats().cache_file_reused) << reuse.stats().cache_note;
    EXPECT_TRUE(run_epoch(reuse, 2) == expected);
    EXPECT_EQ(reuse.stats().decoded, 0u);
  }
  const auto size = fs::file_size(path);
  fs::resize_file(path, size - 100);
  {
    Loader truncated(jpeg_dataset(), augmenting(file_cache(path)));
    EXPECT_FALSE(truncated.stats().cache_file_reused);
    EXPECT_NE(truncated.stats().cache_note.find("truncated"), std::string::npos)
        << truncated.stats().cache_note;
    EXPECT_TRUE(run_epoch(truncated, 2) == expected);
  }
  {  // flip one pixel byte inside the entries
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(4096 + 777);
    char c;
    f.get(c);
    f.seekp(4096 + 777);
    f.put(static_cast<char>(c ^ 0x40));
  }
  {
    Loader corrupt(jpeg_dataset(), augmenting(file_cache(path)));
    EXPECT_NE(corrupt.stats().cache_note.find("checksum"), std::string::npos)
        << corrupt.stats().cache_note;
    EXPECT_TRUE(run_epoch(corrupt, 2) == expected);
  }
  {  // another resize target: another key
    LoaderOptions o = augmenting(file_cache(path));
    o.preprocess.resize_width = 44;
    Loader stale(jpeg_dataset(), o);
    EXPECT_NE(stale.stats().cache_note.find("stale"), std::string::npos)
        << stale.stats().cache_note;
  }
}

TEST(DataLoader, FashionMnistBatchesCarryThePixelsAndLabels) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const Dataset d =
      Dataset::from_idx(dir / "t10k-images-idx3-ubyte.gz", dir / "t10k-labels-idx1-ubyte.gz");
  LoaderOptions o;
  o.preprocess.width = o.preprocess.height = 28;
  o.preprocess.channels = 1;
  o.batch_size = 64;
  o.seed = 5;
  o.cache = no_cache();
  Loader loader(d, o);
  EXPECT_EQ(loader.batches_per_epoch(), 157u);  // 10000 / 64, rounded up
  std::vector<float> images(64 * 28 * 28);
  std::vector<std::int32_t> labels(64);
  ASSERT_EQ(loader.fill_batch(0, 156, std::as_writable_bytes(std::span(images)), labels), 16u);
  ASSERT_EQ(loader.fill_batch(0, 0, std::as_writable_bytes(std::span(images)), labels), 64u);
  // Identify each sample by its pixels (identity resize is exact), then check its label.
  std::size_t matched = 0;
  for (std::size_t i = 0; i < d.size() && matched < 64; ++i) {
    const ImageView px = d.pixels(i);
    for (std::size_t slot = 0; slot < 64; ++slot) {
      bool same = true;
      for (int p = 0; p < 28 * 28 && same; ++p)
        same = images[slot * 784 + p] == px.data[p] * (1.f / 255.f);
      if (same) {
        EXPECT_EQ(labels[slot], d.label(i));
        ++matched;
        break;
      }
    }
  }
  EXPECT_EQ(matched, 64u);
}

TEST(DataLoader, UndecodableSampleThrowsNamingTheFile) {
  const fs::path root = fresh_dir("loader_bad");
  fs::create_directories(root / "a");
  Image image(64, 64, 3);
  std::fill(image.data(), image.data() + image.size_bytes(), 9);
  auto bytes = encode_jpeg(image.view(), 90);
  write_file(root / "a" / "good.jpg", bytes);
  bytes.resize(bytes.size() - 50);
  write_file(root / "a" / "cut.jpg", bytes);
  LoaderOptions o;
  o.preprocess.width = 16;
  o.preprocess.height = 16;
  o.batch_size = 2;
  o.cache = no_cache();
  Loader loader(Dataset::from_folder(root), o);
  std::vector<float> images(2 * 3 * 16 * 16);
  std::vector<std::int32_t> labels(2);
  try {
    loader.fill_batch(0, 0, std::as_writable_bytes(std::span(images)), labels);
    FAIL() << "no error";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.jpg"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke
