// Segmentation data: image + mask folders, classes.txt, MVTec masks, the
// nearest resize of label maps, image/mask alignment under crops and flips,
// every bad input's error, and the synthetic segmentation set end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "stoke/data.hpp"
#include "stoke/error.hpp"

namespace stoke {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(STOKE_TEST_BINARY_DIR) / "test_tmp" / ("seg_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "images");
  fs::create_directories(dir / "masks");
  return dir;
}

// A gray image and its mask from one rule: class `f(x, y)`, image 255 where
// the class is not 0, else 0.
template <class F>
void write_pair(const fs::path& root, const std::string& stem, int width, int height, F f) {
  Image image(width, height, 1), mask(width, height, 1);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const int k = f(x, y);
      mask.data()[y * mask.stride() + x] = static_cast<std::uint8_t>(k);
      image.data()[y * image.stride() + x] = k != 0 ? 255 : 0;
    }
  }
  write_file(root / "images" / (stem + ".png"), encode_png(image.view()));
  write_file(root / "masks" / (stem + ".png"), encode_png(mask.view()));
}

void write_gray(const fs::path& path, int width, int height, std::uint8_t value, int channels = 1) {
  Image image(width, height, channels);
  std::fill(image.data(), image.data() + image.size_bytes(), value);
  write_file(path, encode_png(image.view()));
}

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SegmentationLabels, NearestResizeKeepsOnlyTheMaskValues) {
  Image mask(7, 5, 1);
  const std::uint8_t values[] = {0, 3, 7, 255};
  for (int i = 0; i < 35; ++i) mask.data()[i] = values[(i * 5 + i / 7) % 4];
  for (auto [w, h] : {std::pair{13, 11}, {3, 2}, {7, 5}, {64, 1}}) {
    std::vector<std::int32_t> out(static_cast<std::size_t>(w) * h, -1);
    resize_labels_nearest(mask.view(), w, h, out);
    std::set<std::int32_t> seen(out.begin(), out.end());
    for (auto v : seen) EXPECT_TRUE(v == 0 || v == 3 || v == 7 || v == 255) << v;
    if (w == 7) {  // same size: the mask itself
      for (int i = 0; i < 35; ++i) EXPECT_EQ(out[i], mask.data()[i]);
    }
  }
  // 2x down: pixel (x, y) takes source (2x + 1, 2y + 1), the centre rule.
  Image ramp(4, 4, 1);
  for (int i = 0; i < 16; ++i) ramp.data()[i] = static_cast<std::uint8_t>(i);
  std::vector<std::int32_t> half(4);
  resize_labels_nearest(ramp.view(), 2, 2, half);
  EXPECT_EQ(half, (std::vector<std::int32_t>{5, 7, 13, 15}));
}

TEST(SegmentationLabels, SixteenBitMasksAndInferredClasses) {
  const auto root = fresh_dir("sixteen");
  write_gray(root / "images" / "a.png", 8, 8, 100);
  Image mask(8, 8, 1, 16);
  for (int i = 0; i < 64; ++i) mask.data16()[i] = i < 8 ? 2 : 0;
  write_file(root / "masks" / "a.png", encode_png(mask.view()));
  const auto d = SegmentationDataset::from_folder(root);
  EXPECT_EQ(d.class_names(), (std::vector<std::string>{"background", "class_1", "class_2"}));
  EXPECT_EQ(d.class_pixels(), (std::vector<std::uint64_t>{56, 0, 8}));
}

TEST(SegmentationClasses, ParsesNamesAndRefusesBadFiles) {
  const auto root = fresh_dir("classes");
  std::ofstream(root / "ok.txt") << "background\r\n  scratch \r\nspot\n\n\n";
  EXPECT_EQ(read_class_names(root / "ok.txt"),
            (std::vector<std::string>{"background", "scratch", "spot"}));
  std::ofstream(root / "gap.txt") << "background\n\nspot\n";
  EXPECT_NE(error_of([&] { read_class_names(root / "gap.txt"); }).find("line 2 is blank"),
            std::string::npos);
  std::ofstream(root / "dup.txt") << "background\nspot\nspot\n";
  EXPECT_NE(error_of([&] { read_class_names(root / "dup.txt"); }).find("line 3 repeats"),
            std::string::npos);
  std::ofstream(root / "one.txt") << "background\n";
  EXPECT_NE(error_of([&] { read_class_names(root / "one.txt"); }).find("at least 2"),
            std::string::npos);
  EXPECT_THROW(read_class_names(root / "missing.txt"), IoError);
}

TEST(SegmentationDataset, ReadsClassesAndCountsPixels) {
  const auto root = fresh_dir("counts");
  std::ofstream(root / "classes.txt") << "background\nscratch\nspot\n";
  write_pair(root, "a", 10, 10, [](int x, int) { return x < 3 ? 2 : 0; });
  fs::create_directories(root / "images" / "sub");
  fs::create_directories(root / "masks" / "sub");
  write_pair(root, "sub/b", 10, 10, [](int, int y) { return y == 0 ? 255 : y == 1 ? 1 : 0; });
  std::ofstream(root / "images" / "notes.txt") << "not an image";
  const auto d = SegmentationDataset::from_folder(root);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.class_names(), (std::vector<std::string>{"background", "scratch", "spot"}));
  EXPECT_EQ(d.class_pixels(), (std::vector<std::uint64_t>{150, 10, 30}));
  EXPECT_EQ(d.ignored_pixels(), 10u);
  ASSERT_EQ(d.report().skipped.size(), 1u);  // notes.txt: listed, not dropped silently
  EXPECT_NE(d.report_string().find("spot: 30"), std::string::npos) << d.report_string();
}

struct BadCase {
  const char* name;
  void (*make)(const fs::path&);
  const char* expected[2];
};

TEST(SegmentationDataset, EveryBadInputNamesTheFileAndTheProblem) {
  const BadCase cases[] = {
      {"no_mask",
       [](const fs::path& r) { write_gray(r / "images" / "a.png", 4, 4, 0); },
       {"a.png' has no mask", "masks/a.png"}},
      {"no_image",
       [](const fs::path& r) {
         write_pair(r, "a", 4, 4, [](int, int) { return 0; });
         write_gray(r / "masks" / "b.png", 4, 4, 0);
       },
       {"b.png' has no image", "images/b"}},
      {"size",
       [](const fs::path& r) {
         write_gray(r / "images" / "a.png", 8, 6, 0);
         write_gray(r / "masks" / "a.png", 6, 8, 0);
       },
       {"masks/a.png' is 6x8 but its image", "images/a.png' is 8x6"}},
      {"value",
       [](const fs::path& r) {
         std::ofstream(r / "classes.txt") << "background\nscratch\nspot\n";
         write_pair(r, "a", 4, 4, [](int x, int y) { return x == 2 && y == 1 ? 5 : 1; });
       },
       {"masks/a.png': value 5 at pixel (2, 1)", "(3 classes: 0..2) nor the ignore label 255"}},
      {"colour",
       [](const fs::path& r) {
         write_gray(r / "images" / "a.png", 4, 4, 0);
         write_gray(r / "masks" / "a.png", 4, 4, 1, 3);
       },
       {"masks/a.png' has 3 colour channels", "one channel of class indices"}},
      {"empty", [](const fs::path&) {}, {"no images in", "images"}},
      {"classes_unreadable",
       [](const fs::path& r) {
         write_pair(r, "a", 4, 4, [](int, int) { return 0; });
         fs::create_directories(r / "classes.txt");
       },
       {"cannot read class names", "classes.txt"}},
      {"same_name",
       [](const fs::path& r) {
         write_pair(r, "a", 4, 4, [](int, int) { return 0; });
         write_file(r / "images" / "a.bmp", std::vector<std::uint8_t>{1, 2, 3});
       },
       {"share the name 'a'", "images/a.png"}},
      {"corrupt_mask",
       [](const fs::path& r) {
         write_gray(r / "images" / "a.png", 4, 4, 0);
         auto png = encode_png(Image(4, 4, 1).view());
         png.resize(png.size() / 2);
         write_file(r / "masks" / "a.png", png);
       },
       {"masks/a.png", "truncated"}},
      {"first_in_order",  // checked in parallel, reported in dataset order
       [](const fs::path& r) {
         std::ofstream(r / "classes.txt") << "background\nscratch\n";
         for (int i = 0; i < 12; ++i) {
           const int bad = i == 3 ? 6 : i == 10 ? 5 : 0;
           write_pair(r, std::string(i < 10 ? "p0" : "p") + std::to_string(i), 4, 4,
                      [bad](int x, int) { return x == 1 ? bad : 0; });
         }
       },
       {"masks/p03.png': value 6", "(2 classes: 0..1)"}},
      {"no_masks_folder",
       [](const fs::path& r) {
         write_gray(r / "images" / "a.png", 4, 4, 0);
         fs::remove_all(r / "masks");
       },
       {"masks folder", "is not a folder"}},
  };
  for (const auto& c : cases) {
    const auto root = fresh_dir(std::string("bad_") + c.name);
    c.make(root);
    const std::string e = error_of([&] { SegmentationDataset::from_folder(root); });
    EXPECT_NE(e.find(c.expected[0]), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.expected[1]), std::string::npos) << c.name << ": " << e;
  }
  // The missing-mask error, and only it, can be turned into all-background.
  const auto root = fresh_dir("background");
  write_gray(root / "images" / "a.png", 4, 4, 0);
  SegmentationOptions o;
  o.missing_mask_is_background = true;
  const auto d = SegmentationDataset::from_folder(root, o);
  EXPECT_TRUE(d.sample(0).mask.empty());
  EXPECT_EQ(d.class_pixels()[0], 16u);
}

TEST(SegmentationDataset, MvtecBinaryMasksBecomeTheirDefectClass) {
  const fs::path root = fs::path(STOKE_TEST_BINARY_DIR) / "test_tmp" / "seg_mvtec";
  fs::remove_all(root);
  for (const char* d :
       {"test/good", "test/scratch", "test/crack", "ground_truth/scratch", "ground_truth/crack"})
    fs::create_directories(root / d);
  write_gray(root / "test" / "good" / "000.png", 6, 6, 50);
  write_gray(root / "test" / "crack" / "000.png", 6, 6, 50);
  write_gray(root / "ground_truth" / "crack" / "000_mask.png", 6, 6, 255);
  write_gray(root / "test" / "scratch" / "000.png", 6, 6, 50);
  write_gray(root / "ground_truth" / "scratch" / "000_mask.png", 6, 6, 0);
  const auto d = SegmentationDataset::from_mvtec(root);
  EXPECT_EQ(d.class_names(), (std::vector<std::string>{"background", "crack", "scratch"}));
  EXPECT_EQ(d.class_pixels(), (std::vector<std::uint64_t>{72, 36, 0}));
  SegmentationLoaderOptions lo;
  lo.preprocess.width = lo.preprocess.height = 6;
  lo.shuffle = false;
  lo.batch_size = 3;
  SegmentationLoader loader(d, lo);
  std::vector<float> images(3 * 3 * 36);
  std::vector<std::int32_t> labels(3 * 36);
  ASSERT_EQ(loader.fill_batch(0, 0, images, labels), 3u);
  EXPECT_EQ(labels[0], 0);       // good
  EXPECT_EQ(labels[36], 1);      // crack
  EXPECT_EQ(labels[2 * 36], 0);  // scratch with an empty mask
  write_gray(root / "ground_truth" / "crack" / "000_mask.png", 6, 6, 7);
  EXPECT_NE(error_of([&] { SegmentationDataset::from_mvtec(root); }).find("value 7"),
            std::string::npos);
  write_gray(root / "ground_truth" / "crack" / "001_mask.png", 6, 6, 0);
  EXPECT_NE(error_of([&] { SegmentationDataset::from_mvtec(root); }).find("001_mask.png' has no"),
            std::string::npos);
}

// A pattern with no symmetry: a crop or flip applied to one side only breaks it.
int pattern(int x, int y) {
  return (x * 3 + y * 5) % 7 == 0 || (x < 5 && y < 9) ? 1 : 0;
}

// Whether a label window is sample `s`'s pattern cropped at (ox, oy) and flipped.
bool window_is(const std::int32_t* labels, int s, int ox, int oy, bool hflip, bool vflip) {
  for (int y = 0; y < 20; ++y) {
    for (int x = 0; x < 24; ++x) {
      const int sx = hflip ? 23 - x : x, sy = vflip ? 19 - y : y;
      if (labels[y * 24 + x] != pattern(ox + sx + s, oy + sy)) return false;
    }
  }
  return true;
}

TEST(SegmentationLoader, ImageAndMaskStayAlignedUnderCropsAndFlips) {
  const auto root = fresh_dir("aligned");
  for (int i = 0; i < 4; ++i)
    write_pair(root, "p" + std::to_string(i), 40, 36,
               [i](int x, int y) { return pattern(x + i, y); });
  const auto d = SegmentationDataset::from_folder(root);
  for (int mode = 0; mode < 6; ++mode) {
    const bool hflip = mode % 3 != 1, vflip = mode % 3 != 0, random = mode >= 3;
    SegmentationLoaderOptions o;
    o.preprocess.channels = 1;
    o.preprocess.width = 24;
    o.preprocess.height = 20;
    o.preprocess.resize_width = 40;  // the stored size: the 0/255 image is not blended
    o.preprocess.resize_height = 36;
    o.batch_size = 4;
    o.shuffle = false;  // slot s holds p<s>
    o.seed = 11;
    o.augment.random_crop = random;
    o.augment.hflip_probability = hflip ? 1.f : 0.f;
    o.augment.vflip_probability = vflip ? 1.f : 0.f;
    SegmentationLoader loader(d, o);
    std::vector<float> images(4 * 24 * 20);
    std::vector<std::int32_t> labels(4 * 24 * 20);
    std::set<std::vector<std::int32_t>> windows;
    for (std::uint64_t epoch = 0; epoch < 4; ++epoch) {
      ASSERT_EQ(loader.fill_batch(epoch, 0, images, labels), 4u);
      for (std::size_t i = 0; i < images.size(); ++i) {
        ASSERT_EQ(labels[i], images[i] > 0.5f ? 1 : 0) << "mode " << mode << " value " << i;
      }
      for (int s = 0; s < 4; ++s) {
        const std::int32_t* l = labels.data() + s * 24 * 20;
        if (!random) {  // the centre window, flipped as asked
          EXPECT_TRUE(window_is(l, s, 8, 8, hflip, vflip)) << "mode " << mode << " sample " << s;
          EXPECT_FALSE(window_is(l, s, 8, 8, !hflip, vflip)) << "mode " << mode;
          continue;
        }
        bool found = false;
        for (int ox = 0; ox <= 16 && !found; ++ox)
          for (int oy = 0; oy <= 16 && !found; ++oy) found = window_is(l, s, ox, oy, hflip, vflip);
        EXPECT_TRUE(found) << "mode " << mode << " sample " << s << " epoch " << epoch;
      }
      windows.emplace(labels.begin(), labels.begin() + 24 * 20);
    }
    if (random) {
      EXPECT_GT(windows.size(), 1u) << "the random crop never moved";
    }
  }
}

TEST(SegmentationLoader, RefusesOptionsItCannotServe) {
  const auto root = fresh_dir("options");
  write_pair(root, "a", 16, 16, pattern);
  const auto d = SegmentationDataset::from_folder(root);
  const auto refused = [&](auto change) {
    SegmentationLoaderOptions o;
    o.preprocess.width = o.preprocess.height = 16;
    change(o);
    return error_of([&] { SegmentationLoader(d, o); });
  };
  EXPECT_NE(refused([](auto& o) { o.preprocess.dtype = OutputDtype::kUint8; }).find("float32 only"),
            std::string::npos);
  EXPECT_NE(refused([](auto& o) { o.preprocess.resize_width = 8; }).find("8x16 is smaller"),
            std::string::npos);
  EXPECT_NE(refused([](auto& o) { o.preprocess.channels = 2; }).find("with 2 channels"),
            std::string::npos);
  EXPECT_NE(refused([](auto& o) { o.batch_size = 0; }).find("batch size 0"), std::string::npos);
  SegmentationLoaderOptions o;
  o.preprocess.width = o.preprocess.height = 16;
  o.batch_size = 1;
  SegmentationLoader loader(d, o);
  std::vector<float> images(3 * 256);
  std::vector<std::int32_t> labels(255);  // one short
  EXPECT_NE(error_of([&] { loader.fill_batch(0, 0, images, labels); }).find("need 768 and 256"),
            std::string::npos);
}

TEST(SegmentationLoader, PhotometricJitterTouchesOnlyTheImage) {
  const auto root = fresh_dir("jitter");
  write_pair(root, "a", 16, 16, pattern);
  const auto d = SegmentationDataset::from_folder(root);
  SegmentationLoaderOptions o;
  o.preprocess.channels = 3;
  o.preprocess.width = o.preprocess.height = 16;
  o.batch_size = 1;
  std::vector<float> plain(3 * 256), jittered(3 * 256);
  std::vector<std::int32_t> plain_labels(256), jittered_labels(256);
  SegmentationLoader(d, o).fill_batch(0, 0, plain, plain_labels);
  o.augment.brightness = 0.2f;
  o.augment.contrast = 0.3f;
  SegmentationLoader(d, o).fill_batch(0, 0, jittered, jittered_labels);
  EXPECT_EQ(plain_labels, jittered_labels);
  EXPECT_NE(plain, jittered);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(plain_labels[i], pattern(i % 16, i / 16)) << i;
}

// The segmentation set's masks mark the pixels the anomaly masks mark (one
// generator, one rule), with the class of the defect instead of 255.
TEST(SegmentationSynthetic, MasksMatchTheAnomalyMasks) {
  const fs::path root = fs::path(STOKE_TEST_BINARY_DIR) / "test_tmp" / "seg_vs_anomaly";
  fs::remove_all(root);
  SyntheticOptions so;
  so.width = 80;
  so.height = 60;
  so.defect_fraction = 0.5;
  so.seed = 21;
  so.format = SyntheticOptions::Format::kPng;
  so.mask_root = root / "truth";
  write_synthetic_dataset(root / "classify", 8, so);
  write_synthetic_segmentation_dataset(root / "segment", 8, so);
  Decoder decoder;
  Image seg, truth;
  int defects = 0;
  for (int i = 0; i < 8; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%06d", i);
    decoder.decode_file(root / "segment" / "masks" / (std::string(name) + ".png"), {}, seg);
    ASSERT_EQ(seg.channels(), 1);
    const fs::path anomaly = root / "truth" / "defect" / (std::string(name) + "_mask.png");
    if (!fs::exists(anomaly)) {  // an ok image: all background
      EXPECT_EQ(std::count(seg.data(), seg.data() + seg.size_bytes(), 0), 80 * 60) << name;
      continue;
    }
    ++defects;
    decoder.decode_file(anomaly, {}, truth);
    std::set<int> classes;
    for (std::size_t p = 0; p < seg.size_bytes(); ++p) {
      ASSERT_EQ(seg.data()[p] != 0, truth.data()[p] == 255) << name << " pixel " << p;
      classes.insert(seg.data()[p]);
    }
    for (int k : classes) EXPECT_TRUE(k >= 0 && k <= 2) << k;
  }
  EXPECT_GT(defects, 0);
}

TEST(SegmentationLoader, SyntheticSetEndToEnd) {
  const fs::path root = fs::path(STOKE_TEST_BINARY_DIR) / "test_tmp" / "seg_synthetic";
  fs::remove_all(root);
  SyntheticOptions so;
  so.width = 96;
  so.height = 64;
  so.defect_fraction = 0.75;
  so.seed = 5;
  so.format = SyntheticOptions::Format::kPng;
  write_synthetic_segmentation_dataset(root, 10, so);
  const auto d = SegmentationDataset::from_folder(root);
  ASSERT_EQ(d.size(), 10u);
  EXPECT_EQ(d.class_names(), (std::vector<std::string>{"background", "scratch", "spot"}));
  std::uint64_t total = 0;
  for (auto n : d.class_pixels()) total += n;
  EXPECT_EQ(total, 10u * 96 * 64);
  EXPECT_GT(d.class_pixels()[1], 0u);
  EXPECT_LT(d.class_pixels()[1] + d.class_pixels()[2], total / 4);

  SegmentationLoaderOptions o;
  o.preprocess.width = 48;
  o.preprocess.height = 32;
  o.batch_size = 4;
  o.seed = 9;
  o.augment.hflip_probability = 0.5f;
  SegmentationLoader loader(d, o);
  EXPECT_EQ(loader.batches_per_epoch(), 3u);
  EXPECT_EQ(loader.image_shape(), (std::array<std::size_t, 4>{4, 3, 32, 48}));
  EXPECT_EQ(loader.label_shape(), (std::array<std::size_t, 3>{4, 32, 48}));
  std::vector<float> images(4 * 3 * 32 * 48), again(images.size());
  std::vector<std::int32_t> labels(4 * 32 * 48), labels_again(labels.size());
  std::set<std::int32_t> seen;
  for (std::uint64_t b = 0; b < 3; ++b) {
    const std::size_t n = loader.fill_batch(1, b, images, labels);
    EXPECT_EQ(n, b < 2 ? 4u : 2u);
    for (std::size_t i = 0; i < n * 32 * 48; ++i) seen.insert(labels[i]);
    for (std::size_t i = 0; i < n * 3 * 32 * 48; ++i) {
      ASSERT_GE(images[i], 0.f);
      ASSERT_LE(images[i], 1.f);
    }
  }
  EXPECT_TRUE(seen.count(0) && seen.count(1)) << "labels seen: " << seen.size();
  for (auto v : seen) EXPECT_TRUE(v >= 0 && v <= 2) << v;
  // Same (epoch, batch): the same bytes.
  loader.fill_batch(1, 0, images, labels);
  loader.fill_batch(1, 0, again, labels_again);
  EXPECT_EQ(images, again);
  EXPECT_EQ(labels, labels_again);
  EXPECT_THROW(loader.fill_batch(1, 3, images, labels), InvalidArgument);
}

}  // namespace
}  // namespace stoke
