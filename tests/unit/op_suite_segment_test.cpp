// The segmentation ops on every backend against the naive reference:
// upsampling (nearest and bilinear, up and down, odd ratios), channel
// concatenation, per-pixel cross-entropy (class weights, ignore label) and
// soft Dice; gradients against central differences; known values; the front
// doors' errors.
#include <cmath>

#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

const char* mode_name(UpsampleMode mode) {
  return mode == UpsampleMode::kNearest ? "nearest" : "bilinear";
}

// Labels in [0, k), a share of them the ignore label.
std::vector<std::int32_t> pixel_labels(std::size_t n, int k, std::uint32_t seed, int ignore,
                                       int ignore_every) {
  auto v = random_labels(n, k, seed);
  if (ignore_every > 0)
    for (std::size_t i = 0; i < v.size(); i += static_cast<std::size_t>(ignore_every))
      v[i] = ignore;
  return v;
}

TEST_P(OpSuite, UpsampleMatchesNaiveOnRandomShapes) {
  ShapeRng rng(31);
  std::uint32_t seed = 900;
  for (int i = 0; i < 60; ++i) {
    const UpsampleMode mode = i % 2 ? UpsampleMode::kBilinear : UpsampleMode::kNearest;
    const std::int64_t n = rng.pick(1, 2), c = rng.pick(1, 4);
    const std::int64_t h = i == 0 ? 1 : rng.pick(1, 9), w = rng.pick(1, 9);
    // Exact factors, odd ratios, and downsampling.
    const std::int64_t oh = rng.coin() ? h * rng.pick(1, 3) : rng.pick(1, 17);
    const std::int64_t ow = rng.coin() ? w * rng.pick(1, 3) : rng.pick(1, 17);
    const auto x = both({n, c, h, w}, ++seed);
    const auto dy = both({n, c, oh, ow}, ++seed);
    auto y = out({n, c, oh, ow}), dx = out({n, c, h, w});
    be().upsample2d_forward(x.dut, y.dut.tensor, mode);
    be().upsample2d_backward(dy.dut, dx.dut.tensor, mode);
    cpu::naive::upsample2d_forward(x.ref, y.ref, mode);
    cpu::naive::upsample2d_backward(dy.ref, dx.ref, mode);
    const std::string what = std::string(mode_name(mode)) + " " + shape_to_string({n, c, h, w}) +
                             " -> " + std::to_string(oh) + "x" + std::to_string(ow);
    expect_output(y, tolerance(Accuracy::kElementwise), "y " + what);
    // A source pixel sums the dy values it feeds: up to (oh/h + 2) x (ow/w + 2) terms.
    const auto terms = static_cast<std::size_t>((oh / h + 2) * (ow / w + 2));
    expect_output(dx, tolerance(Accuracy::kReduction, terms), "dx " + what);
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, UpsampleKnownValues) {
  // 2x2 -> 4x4: nearest repeats each pixel; bilinear (align_corners=False)
  // gives PyTorch's row 0 of [[1, 2], [3, 4]]: 1, 1.25, 1.75, 2.
  const std::vector<float> xv = {1, 2, 3, 4};
  Tensor x = upload(be(), {1, 1, 2, 2}, xv), y(be(), {1, 1, 4, 4});
  be().upsample2d_forward(x, y, UpsampleMode::kNearest);
  auto v = y.to_vector();
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 1.0f);
  EXPECT_EQ(v[2], 2.0f);
  EXPECT_EQ(v[15], 4.0f);
  be().upsample2d_forward(x, y, UpsampleMode::kBilinear);
  v = y.to_vector();
  EXPECT_NEAR(v[0], 1.0f, 1e-6);
  EXPECT_NEAR(v[1], 1.25f, 1e-6);
  EXPECT_NEAR(v[2], 1.75f, 1e-6);
  EXPECT_NEAR(v[3], 2.0f, 1e-6);
  EXPECT_NEAR(v[5], 1.75f, 1e-6);  // row 1: 0.75 (0.75 + 0.5) + 0.25 (2.25 + 1)
  // The backward of nearest 2x: each source pixel gathers its four copies.
  Tensor dy = upload(be(), {1, 1, 4, 4}, std::vector<float>(16, 1.0f)), dx(be(), {1, 1, 2, 2});
  be().upsample2d_backward(dy, dx, UpsampleMode::kNearest);
  for (float g : dx.to_vector()) EXPECT_EQ(g, 4.0f);
  be().upsample2d_backward(dy, dx, UpsampleMode::kBilinear);
  for (float g : dx.to_vector())
    EXPECT_NEAR(g, 4.0f, 1e-5) << "the weights of each output sum to 1";
}

TEST_P(OpSuite, UpsampleBackwardIsTheForwardsAdjoint) {
  for (const UpsampleMode mode : {UpsampleMode::kNearest, UpsampleMode::kBilinear}) {
    const Shape xs = {2, 3, 5, 7}, ys = {2, 3, 9, 4};
    auto xv = random_values(static_cast<std::size_t>(shape_numel(xs)), 5);
    const auto r = random_values(static_cast<std::size_t>(shape_numel(ys)), 6);
    Tensor x = upload(be(), xs, xv), y(be(), ys), dy = upload(be(), ys, r), dx(be(), xs);
    be().upsample2d_backward(dy, dx, mode);
    expect_gradient(
        xv, dx.to_vector(),
        [&] {
          x.copy_from_host(xv.data());
          be().upsample2d_forward(x, y, mode);
          const auto yv = y.to_vector();
          double sum = 0;
          for (std::size_t i = 0; i < yv.size(); ++i) sum += static_cast<double>(yv[i]) * r[i];
          return sum;
        },
        std::string("dx ") + mode_name(mode));
  }
}

TEST_P(OpSuite, ConcatChannelsMatchesNaive) {
  ShapeRng rng(32);
  std::uint32_t seed = 1000;
  for (int i = 0; i < 12; ++i) {
    const std::int64_t n = rng.pick(1, 3), ca = rng.pick(1, 5), cb = rng.pick(1, 5);
    const std::int64_t h = rng.pick(1, 6), w = rng.pick(1, 6);
    const auto a = both({n, ca, h, w}, ++seed), b = both({n, cb, h, w}, ++seed);
    const auto dy = both({n, ca + cb, h, w}, ++seed);
    auto y = out({n, ca + cb, h, w}), da = out({n, ca, h, w}), db = out({n, cb, h, w});
    be().concat_channels_forward(a.dut, b.dut, y.dut.tensor);
    be().concat_channels_backward(dy.dut, da.dut.tensor, db.dut.tensor);
    cpu::naive::concat_channels_forward(a.ref, b.ref, y.ref);
    cpu::naive::concat_channels_backward(dy.ref, da.ref, db.ref);
    const std::string what = "a " + std::to_string(ca) + " b " + std::to_string(cb);
    expect_output(y, tolerance(Accuracy::kExact), "y " + what);
    expect_output(da, tolerance(Accuracy::kExact), "da " + what);
    expect_output(db, tolerance(Accuracy::kExact), "db " + what);
    // One side only.
    auto db_only = out({n, cb, h, w});
    Tensor none;
    be().concat_channels_backward(dy.dut, none, db_only.dut.tensor);
    db_only.ref = db.ref;
    expect_output(db_only, tolerance(Accuracy::kExact), "db alone " + what);
    if (HasFailure()) return;
  }
}

struct PixelCase {
  std::int64_t n, k, h, w;
  bool weights;
  int ignore_every;
};

TEST_P(OpSuite, PixelLossesMatchNaiveOnRandomShapes) {
  const std::vector<PixelCase> cases = {
      {1, 2, 1, 1, false, 0}, {2, 3, 4, 5, false, 0}, {2, 4, 6, 3, true, 0},
      {3, 5, 7, 7, true, 3},  {1, 1, 3, 3, false, 2}, {2, 6, 9, 11, true, 5},
  };
  std::uint32_t seed = 1100;
  for (const PixelCase& c : cases) {
    PixelLossParams params;
    params.ignore_label = 255;
    params.smooth = c.ignore_every % 2 ? 1.0f : 0.0f;
    const Shape s = {c.n, c.k, c.h, c.w};
    const auto logits = both(s, ++seed, -3.0f, 3.0f);
    const auto lv = pixel_labels(static_cast<std::size_t>(c.n * c.h * c.w), static_cast<int>(c.k),
                                 ++seed, params.ignore_label, c.ignore_every);
    Tensor labels = upload(be(), {c.n, c.h, c.w}, lv);
    Tensor labels_ref = upload(ref(), {c.n, c.h, c.w}, lv);
    const auto wv = random_values(static_cast<std::size_t>(c.k), ++seed, 0.2f, 2.0f);
    Tensor weights = c.weights ? upload(be(), {c.k}, wv) : Tensor();
    Tensor weights_ref = c.weights ? upload(ref(), {c.k}, wv) : Tensor();
    auto probs = out(s), loss = out({2}), dlogits = out(s);
    be().pixel_cross_entropy_forward(logits.dut, labels, weights, probs.dut.tensor, loss.dut.tensor,
                                     params);
    be().pixel_cross_entropy_backward(probs.dut.tensor, labels, weights, loss.dut.tensor,
                                      dlogits.dut.tensor, params);
    cpu::naive::pixel_cross_entropy_forward(logits.ref, labels_ref, weights_ref, probs.ref,
                                            loss.ref, params);
    cpu::naive::pixel_cross_entropy_backward(probs.ref, labels_ref, weights_ref, loss.ref,
                                             dlogits.ref, params);
    const std::string what = "cross-entropy " + shape_to_string(s) +
                             (c.weights ? " weighted" : "") + " ignore every " +
                             std::to_string(c.ignore_every);
    const auto k = static_cast<std::size_t>(c.k);
    const auto pixels = static_cast<std::size_t>(c.n * c.h * c.w);
    expect_output(probs, tolerance(Accuracy::kTranscendental, k), "probs " + what);
    expect_output(loss, tolerance(Accuracy::kReduction, pixels * 80), "loss " + what);
    expect_output(dlogits, tolerance(Accuracy::kTranscendental, k), "dlogits " + what);

    auto dprobs = out(s), sums = out({c.k, 3}), dice = out({1}), ddice = out(s);
    be().dice_loss_forward(logits.dut, labels, dprobs.dut.tensor, sums.dut.tensor, dice.dut.tensor,
                           params);
    be().dice_loss_backward(dprobs.dut.tensor, labels, sums.dut.tensor, ddice.dut.tensor, params);
    cpu::naive::dice_loss_forward(logits.ref, labels_ref, dprobs.ref, sums.ref, dice.ref, params);
    cpu::naive::dice_loss_backward(dprobs.ref, labels_ref, sums.ref, ddice.ref, params);
    const std::string dwhat = "dice " + shape_to_string(s) + " smooth " +
                              std::to_string(params.smooth) + " ignore every " +
                              std::to_string(c.ignore_every);
    expect_output(sums, tolerance(Accuracy::kReduction, pixels * 80), "sums " + dwhat);
    expect_output(dice, tolerance(Accuracy::kReduction, pixels * 80), "loss " + dwhat);
    expect_output(ddice, tolerance(Accuracy::kReduction, pixels * 80), "dlogits " + dwhat);
    if (HasFailure()) return;
  }
}

// d loss / d logits of both losses against central differences, with
// weights, an ignored pixel and a class absent from the labels.
TEST_P(OpSuite, PixelLossGradientsMatchFiniteDifferences) {
  const Shape s = {2, 4, 3, 2};
  auto lv = random_values(static_cast<std::size_t>(shape_numel(s)), 8, -2.0f, 2.0f);
  const std::vector<std::int32_t> lab = {0, 1, 2, 0, -1, 1, 2, 2, 0, 1, 1, 0};  // no class 3
  PixelLossParams params;
  params.ignore_label = -1;
  params.smooth = 0.5f;
  Tensor logits = upload(be(), s, lv), labels = upload(be(), {2, 3, 2}, lab);
  Tensor weights = upload(be(), {4}, std::vector<float>{1.0f, 2.0f, 0.5f, 3.0f});
  Tensor probs(be(), s), loss(be(), {2}), d(be(), s), sums(be(), {4, 3}), dice(be(), {1});
  be().pixel_cross_entropy_forward(logits, labels, weights, probs, loss, params);
  be().pixel_cross_entropy_backward(probs, labels, weights, loss, d, params);
  expect_gradient(
      lv, d.to_vector(),
      [&] {
        logits.copy_from_host(lv.data());
        be().pixel_cross_entropy_forward(logits, labels, weights, probs, loss, params);
        return static_cast<double>(loss.to_vector()[0]);
      },
      "cross-entropy dlogits");
  logits.copy_from_host(lv.data());
  be().dice_loss_forward(logits, labels, probs, sums, dice, params);
  be().dice_loss_backward(probs, labels, sums, d, params);
  // The Dice loss is small and flat: scale it so the differences are above rounding.
  auto scaled = d.to_vector();
  for (float& g : scaled) g *= 100.0f;
  expect_gradient(
      lv, scaled,
      [&] {
        logits.copy_from_host(lv.data());
        be().dice_loss_forward(logits, labels, probs, sums, dice, params);
        return 100.0 * static_cast<double>(dice.to_vector()[0]);
      },
      "dice dlogits");
}

TEST_P(OpSuite, PixelLossesKnownValues) {
  // Uniform logits over 4 classes: cross-entropy ln 4; the ignored pixel counts nowhere.
  const Shape s = {1, 4, 1, 3};
  Tensor logits = upload(be(), s, std::vector<float>(12, 0.0f));
  Tensor labels = upload(be(), {1, 1, 3}, std::vector<std::int32_t>{0, 3, 7});
  PixelLossParams params;
  params.ignore_label = 7;
  Tensor probs(be(), s), loss(be(), {2}), d(be(), s), sums(be(), {4, 3}), dice(be(), {1});
  be().pixel_cross_entropy_forward(logits, labels, Tensor(), probs, loss, params);
  auto l = loss.to_vector();
  EXPECT_NEAR(l[0], std::log(4.0), 1e-5);
  EXPECT_EQ(l[1], 2.0f) << "two pixels count";
  be().pixel_cross_entropy_backward(probs, labels, Tensor(), loss, d, params);
  const auto g = d.to_vector();
  for (int c = 0; c < 4; ++c) EXPECT_EQ(g[static_cast<std::size_t>(c * 3 + 2)], 0.0f);
  // Every pixel ignored: loss 0 and weight 0, no gradient (PyTorch would give NaN).
  Tensor all_ignored = upload(be(), {1, 1, 3}, std::vector<std::int32_t>{7, 7, 7});
  be().pixel_cross_entropy_forward(logits, all_ignored, Tensor(), probs, loss, params);
  l = loss.to_vector();
  EXPECT_EQ(l[0], 0.0f);
  EXPECT_EQ(l[1], 0.0f);
  // Logit gaps far beyond fp32's exp range: the loss is the gap (log-softmax),
  // not inf from the log of an underflowed probability.
  std::vector<float> far(12, 0.0f);
  far[1 * 3 + 0] = 200.0f;  // pixel 0: class 1 at +200, its label 0 at 0
  far[0 * 3 + 1] = 100.0f;  // pixel 1: class 0 at +100, its label 3 at -50
  far[3 * 3 + 1] = -50.0f;
  logits.copy_from_host(far.data());
  be().pixel_cross_entropy_forward(logits, labels, Tensor(), probs, loss, params);
  l = loss.to_vector();
  ASSERT_TRUE(std::isfinite(l[0])) << "cross-entropy overflowed: " << l[0];
  EXPECT_NEAR(l[0], (200.0 + 150.0) / 2.0, 1e-3);
  // A confident right prediction: Dice loss near 0 for the classes present, and
  // classes absent from the labels count 0.
  std::vector<float> sure(12, -20.0f);
  sure[0 * 3 + 0] = 20.0f;  // pixel 0: class 0
  sure[3 * 3 + 1] = 20.0f;  // pixel 1: class 3
  sure[1 * 3 + 2] = 20.0f;  // pixel 2 (ignored)
  logits.copy_from_host(sure.data());
  be().dice_loss_forward(logits, labels, probs, sums, dice, params);
  EXPECT_NEAR(dice.to_vector()[0], 0.0f, 1e-5);
  const auto sv = sums.to_vector();
  EXPECT_NEAR(sv[0 * 3 + 2], 1.0f, 1e-6) << "G of class 0";
  EXPECT_NEAR(sv[1 * 3 + 1], 0.0f, 1e-6) << "the ignored pixel's class 1 is not summed";
  // Wrong everywhere: each present class scores 1 - 0 = 1, the mean over 4 classes 0.5.
  std::vector<float> wrong(12, -20.0f);
  wrong[1 * 3 + 0] = 20.0f;
  wrong[2 * 3 + 1] = 20.0f;
  logits.copy_from_host(wrong.data());
  be().dice_loss_forward(logits, labels, probs, sums, dice, params);
  EXPECT_NEAR(dice.to_vector()[0], 0.5f, 1e-5);
}

TEST_P(OpSuite, SegmentationFrontDoorsNameTheBadTensor) {
  Tensor x(be(), {1, 2, 3, 3}), y(be(), {1, 3, 6, 6});
  expect_invalid([&] { be().upsample2d_forward(x, y, UpsampleMode::kBilinear); }, "'y'");
  Tensor y_ok(be(), {1, 2, 6, 6});
  expect_invalid([&] { be().upsample2d_forward(x, y_ok, static_cast<UpsampleMode>(9)); }, "mode");
  Tensor a(be(), {1, 2, 3, 3}), b(be(), {1, 1, 4, 3}), cat(be(), {1, 3, 3, 3});
  expect_invalid([&] { be().concat_channels_forward(a, b, cat); }, "'b'");
  Tensor none;
  expect_invalid([&] { be().concat_channels_backward(cat, none, none); }, "neither");
  Tensor logits(be(), {1, 2, 3, 3}), probs(be(), {1, 2, 3, 3}), loss(be(), {2});
  Tensor float_labels(be(), {1, 3, 3});
  expect_invalid(
      [&] { be().pixel_cross_entropy_forward(logits, float_labels, none, probs, loss, {}); },
      "int32");
  Tensor short_labels = upload(be(), {1, 3, 2}, std::vector<std::int32_t>(6, 0));
  expect_invalid(
      [&] { be().pixel_cross_entropy_forward(logits, short_labels, none, probs, loss, {}); },
      "'labels'");
  Tensor labels = upload(be(), {1, 3, 3}, std::vector<std::int32_t>(9, 0));
  Tensor weights(be(), {3});
  expect_invalid(
      [&] { be().pixel_cross_entropy_forward(logits, labels, weights, probs, loss, {}); },
      "'class_weights'");
  Tensor sums(be(), {2, 3}), dice(be(), {1});
  PixelLossParams negative;
  negative.smooth = -1.0f;
  expect_invalid([&] { be().dice_loss_forward(logits, labels, probs, sums, dice, negative); },
                 "smooth");
  if (be().is_host()) {  // label values are checked where they are read (a GPU kernel cannot throw)
    Tensor bad = upload(be(), {1, 3, 3}, std::vector<std::int32_t>{0, 0, 0, 0, 2, 0, 0, 0, 0});
    EXPECT_THROW(be().pixel_cross_entropy_forward(logits, bad, none, probs, loss, {}),
                 InvalidArgument);
    EXPECT_THROW(be().dice_loss_forward(logits, bad, probs, sums, dice, {}), InvalidArgument);
  }
}

}  // namespace
}  // namespace stoke::testing
