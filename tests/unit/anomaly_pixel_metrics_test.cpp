// Pixel-level anomaly metrics (stoke/anomaly.hpp): masks brought to the
// input grid as the preprocessing brings images, pixel AUROC and AUPRO on
// maps whose answers are known, and the generator's masks on its defects.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "stoke/anomaly.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"

namespace stoke::anomaly {
namespace {

Image mask_image(int width, int height, std::initializer_list<std::pair<int, int>> on) {
  Image m(width, height, 1);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) m.data()[y * m.stride() + x] = 0;
  for (auto [x, y] : on) m.data()[y * m.stride() + x] = 255;
  return m;
}

TEST(AnomalyPixelMetrics, MaskFollowsResizeAndCentreCrop) {
  PreprocessOptions p;
  p.width = p.height = 4;
  // 8x8 -> 4x4 (no crop): output (x, y) reads source pixel (2x + 1, 2y + 1).
  const Image m = mask_image(8, 8, {{3, 5}, {0, 0}});
  const auto out = mask_to_input(m.view(), 8, 8, p, "m.png");
  std::vector<std::uint8_t> want(16, 0);
  want[2 * 4 + 1] = 1;  // (3, 5) is the centre of output (1, 2); (0, 0) is read by none
  EXPECT_EQ(out, want);
  // 8x8 -> resize 6x6 -> centre crop 4x4 (offset 1): output (0, 0) is resized (1, 1),
  // whose centre 1.5 of 6 maps to source 2.67 -> pixel 2.
  p.resize_width = p.resize_height = 6;
  const auto cropped = mask_to_input(mask_image(8, 8, {{2, 2}}).view(), 8, 8, p, "m.png");
  EXPECT_EQ(cropped[0], 1);
  EXPECT_EQ(std::count(cropped.begin(), cropped.end(), 1), 1);
  try {
    mask_to_input(mask_image(8, 6, {}).view(), 8, 8, p, "m.png");
    ADD_FAILURE() << "a mask of another size was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'m.png' is 8x6, its image 8x8"), std::string::npos)
        << e.what();
  }
}

TEST(AnomalyPixelMetrics, PerfectInvertedAndTiedMaps) {
  // Two 3x3 images; image 0 holds a defect region of 2 pixels.
  std::vector<std::uint8_t> masks(18, 0);
  masks[0] = masks[1] = 1;
  std::vector<float> perfect(18, 0.f), inverted(18, 1.f), tied(18, 0.5f);
  perfect[0] = perfect[1] = 1.f;
  inverted[0] = inverted[1] = 0.f;
  const PixelMetrics p = pixel_metrics(perfect, masks, 3, 3);
  EXPECT_DOUBLE_EQ(p.auroc, 1.0);
  EXPECT_DOUBLE_EQ(p.aupro, 1.0);
  EXPECT_EQ(p.regions, 1u);
  EXPECT_EQ(p.defect_pixels, 2u);
  const PixelMetrics i = pixel_metrics(inverted, masks, 3, 3);
  EXPECT_DOUBLE_EQ(i.auroc, 0.0);
  EXPECT_DOUBLE_EQ(i.aupro, 0.0);
  const PixelMetrics t = pixel_metrics(tied, masks, 3, 3);
  EXPECT_DOUBLE_EQ(t.auroc, 0.5);
  // Everything crosses at once (FPR 0 -> 1, PRO 0 -> 1): the line PRO = FPR up to 0.3.
  EXPECT_NEAR(t.aupro, 0.15, 1e-12);
}

TEST(AnomalyPixelMetrics, AuproAveragesRegionsNotPixels) {
  // 4x4: a big region (4 pixels, top-left block) found before any good pixel,
  // a one-pixel region (bottom-right) scored below every good pixel.
  std::vector<std::uint8_t> masks(16, 0);
  std::vector<float> maps(16, 1.f);
  for (int k : {0, 1, 4, 5}) masks[k] = 1, maps[k] = 10.f;
  masks[15] = 1, maps[15] = 0.f;
  const PixelMetrics m = pixel_metrics(maps, masks, 4, 4);
  EXPECT_EQ(m.regions, 2u);
  EXPECT_DOUBLE_EQ(m.aupro, 0.5);  // half of the regions found over the whole FPR range
  EXPECT_NEAR(m.auroc, (4.0 * 11 + 0.0) / (5.0 * 11), 1e-12);  // 4 of 5 defect pixels above all
  // Diagonal neighbours are one region (8-connectivity).
  std::vector<std::uint8_t> diagonal(16, 0);
  diagonal[0] = diagonal[5] = diagonal[10] = 1;
  EXPECT_EQ(pixel_metrics(maps, diagonal, 4, 4).regions, 1u);
}

TEST(AnomalyPixelMetrics, RefusesMismatchedOrDegenerateInput) {
  std::vector<float> maps(9, 0.f);
  std::vector<std::uint8_t> masks(9, 0);
  EXPECT_THROW(pixel_metrics(maps, masks, 3, 3), InvalidArgument);  // no defect pixel
  masks[0] = 1;
  EXPECT_THROW(pixel_metrics(maps, std::vector<std::uint8_t>(8, 1), 3, 3), InvalidArgument);
  maps[4] = NAN;
  EXPECT_THROW(pixel_metrics(maps, masks, 3, 3), InvalidArgument);
  maps[4] = 0.f;
  EXPECT_THROW(pixel_metrics(maps, masks, 3, 3, 0.0), InvalidArgument);
}

TEST(AnomalyPixelMetrics, GeneratorMasksMarkTheDefectsItDraws) {
  Image good, good_mask, defect, mask, plain;
  synthetic_inspection_image(96, 80, 5, false, good, &good_mask);
  synthetic_inspection_image(96, 80, 5, true, defect, &mask);
  synthetic_inspection_image(96, 80, 5, true, plain);  // the same image, no mask asked
  ASSERT_EQ(mask.width(), 96);
  ASSERT_EQ(mask.height(), 80);
  ASSERT_EQ(mask.channels(), 1);
  std::size_t on = 0, good_on = 0;
  for (int y = 0; y < 80; ++y) {
    for (int x = 0; x < 96; ++x) {
      on += mask.data()[y * mask.stride() + x] == 255;
      good_on += good_mask.data()[y * good_mask.stride() + x] != 0;
      ASSERT_EQ(defect.data()[y * defect.stride() + 3 * x],
                plain.data()[y * plain.stride() + 3 * x])
          << "asking for the mask changed the image";
    }
  }
  EXPECT_EQ(good_on, 0u);  // a good part has no defect pixel
  EXPECT_GT(on, 0u);
  EXPECT_LT(on, 96u * 80u / 2);
}

}  // namespace
}  // namespace stoke::anomaly
