// Tiling at native resolution (PatchCoreOptions::tile): the tile grid covers
// every pixel; a small dark spot in a larger part is found at its place by a
// tiled model and raises the score far more than through a resize of the
// whole part; a tiled model file keeps its tiles; an image smaller than a
// tile is refused by name; bytes and camera buffers score as the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "data/tiles.hpp"
#include "op_test_util.hpp"
#include "stoke/anomaly.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kInput = 96, kImage = 384, kSpot = 12;

std::unique_ptr<nn::Model> backbone() {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kResNet18;
  spec.width_multiplier = 0.5f;
  spec.in_channels = 3;
  spec.height = spec.width = kInput;
  spec.classes = 2;
  return nn::build_model(cpu_backend(), spec, 1);
}

PreprocessOptions preprocess() {
  PreprocessOptions p;
  p.width = p.height = kInput;
  p.channels = 3;
  p.normalization = Normalization::mean_std(std::vector<float>{0.485f, 0.456f, 0.406f},
                                            std::vector<float>{0.229f, 0.224f, 0.225f});
  return p;
}

TEST(AnomalyTiles, GridCoversTheImageAndRefusesSmallImages) {
  const auto g = data_detail::tile_grid(250, 100, 96, 80, "a.png");
  // x: 0, 80, 154 (the last ends at the edge); y: 0, 4.
  std::vector<std::pair<int, int>> want = {{0, 0}, {80, 0}, {154, 0}, {0, 4}, {80, 4}, {154, 4}};
  EXPECT_EQ(g.origins, want);
  EXPECT_EQ(data_detail::tile_grid(96, 96, 96, 96, "b").origins.size(), 1u);
  try {
    data_detail::tile_grid(250, 90, 96, 96, "small.png");
    ADD_FAILURE() << "a tile larger than the image was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'small.png' is 250x90, smaller than a 96x96 tile"),
              std::string::npos)
        << e.what();
  }
}

class AnomalyTiled : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoke_tiles_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Image img;
    for (int i = 0; i < 4; ++i) {
      synthetic_inspection_image(kImage, kImage, 40 + static_cast<std::uint64_t>(i), false, img);
      const fs::path f = dir_ / ("good" + std::to_string(i) + ".png");
      write_file(f, encode_png(img.view()));
      (i < 3 ? train_ : held_).push_back(f);
    }
    // The held-out part again with a dark kSpot x kSpot spot at (x0, y0).
    synthetic_inspection_image(kImage, kImage, 43, false, img);
    for (int y = y0_; y < y0_ + kSpot; ++y)
      for (int x = x0_; x < x0_ + kSpot; ++x)
        for (int c = 0; c < 3; ++c) img.data()[y * img.stride() + 3 * x + c] = 15;
    spotted_ = dir_ / "spotted.png";
    write_file(spotted_, encode_png(img.view()));
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_, spotted_;
  std::vector<fs::path> train_, held_;
  const int x0_ = 230, y0_ = 140;
};

// Random backbone features (no pretrained weights here) score the tiles of a
// held-out good part unevenly (its shading differs from the three training
// parts'), so the part's score is its most unusual tile's either way; the
// spot shows in the map: where it is, the tiled map rises far more than the
// map of the whole part resized to the input, and the rise peaks on it.
TEST_F(AnomalyTiled, ASmallSpotIsFoundAtNativeResolutionAndLostInAResize) {
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 0.25;
  o.tile = kInput;
  o.tile_stride = 72;  // overlapping
  anomaly::PatchCore tiled(backbone(), preprocess(), o);
  tiled.fit(train_);
  const auto clean = tiled.score_file(held_[0]);
  const auto spot = tiled.score_file(spotted_);
  ASSERT_EQ(spot.width, kImage);
  ASSERT_EQ(spot.height, kImage);
  ASSERT_EQ(spot.map.size(), static_cast<std::size_t>(kImage * kImage));
  EXPECT_GE(spot.score, clean.score);
  std::vector<float> rise(spot.map.size());
  for (std::size_t i = 0; i < rise.size(); ++i) rise[i] = spot.map[i] - clean.map[i];
  const auto peak = std::max_element(rise.begin(), rise.end()) - rise.begin();
  const int cy = y0_ + kSpot / 2, cx = x0_ + kSpot / 2;
  EXPECT_NEAR(static_cast<int>(peak / kImage), cy, 16);
  EXPECT_NEAR(static_cast<int>(peak % kImage), cx, 16);
  const std::size_t at = static_cast<std::size_t>(cy * kImage + cx);
  const float gain_tiled = spot.map[at] / clean.map[at];

  anomaly::PatchCoreOptions whole = o;
  whole.tile = whole.tile_stride = 0;
  anomaly::PatchCore resized(backbone(), preprocess(), whole);
  resized.fit(train_);
  const auto r_spot = resized.score_file(spotted_), r_clean = resized.score_file(held_[0]);
  const std::size_t r_at =
      static_cast<std::size_t>(cy * kInput / kImage * kInput + cx * kInput / kImage);
  const float gain_resized = r_spot.map[r_at] / r_clean.map[r_at];
  EXPECT_GT(gain_tiled, 1.2f);
  EXPECT_GT(gain_tiled - 1.0f, 2.0f * (gain_resized - 1.0f))
      << "the map at the spot rises " << gain_tiled << "x tiled, " << gain_resized << "x resized";

  // The same image as bytes and as a camera buffer (RGB8: the PNG's pixels).
  std::vector<std::uint8_t> bytes;
  read_file(spotted_, bytes);
  const auto from_bytes = tiled.score_bytes(bytes, "spotted");
  EXPECT_EQ(from_bytes.score, spot.score);
  EXPECT_EQ(from_bytes.map, spot.map);
  Image decoded;
  Decoder().decode(bytes, "spotted", {}, decoded);
  PixelBuffer frame{decoded.data(), decoded.width(), decoded.height(), PixelFormat::kRgb8,
                    decoded.stride()};
  EXPECT_EQ(tiled.score_pixels(frame).score, spot.score);

  // The model file keeps the tiles: the loaded model scores the same at the image's size.
  tiled.save(dir_ / "tiled.stoke");
  anomaly::PatchCore back = anomaly::PatchCore::load(dir_ / "tiled.stoke", cpu_backend());
  EXPECT_EQ(back.options().tile, kInput);
  EXPECT_EQ(back.options().tile_stride, 72);
  const auto again = back.score_file(spotted_);
  EXPECT_EQ(again.score, spot.score);
  EXPECT_EQ(again.map, spot.map);
}

TEST_F(AnomalyTiled, AnImageSmallerThanATileIsRefusedByName) {
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 1.0;
  o.tile = kImage + 1;
  anomaly::PatchCore core(backbone(), preprocess(), o);
  try {
    core.fit(train_);
    ADD_FAILURE() << "fit accepted images smaller than the tile";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(train_[0].string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke::testing
