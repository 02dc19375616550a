// Batch norm on every backend against the naive reference: training
// (output, running and saved statistics), inference and backward on random
// shapes, backward against central differences, and a known normalization.
#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

std::vector<Shape> random_shapes(int count, std::uint32_t seed) {
  ShapeRng rng(seed);
  std::vector<Shape> shapes = {
      {2, 3, 4, 5}, {4, 1, 3, 3}, {1, 7, 2, 9}, {3, 16, 7, 7}, {2, 2, 1, 1}};
  while (static_cast<int>(shapes.size()) < count) {
    shapes.push_back({rng.pick(1, 4), rng.pick(1, 9), rng.pick(1, 9), rng.pick(1, 9)});
  }
  return shapes;
}

// Per-channel parameters and statistics, the same on both sides.
struct Channels {
  OpSuite::Pair gamma, beta, mean, var;
  Channels(OpSuite& t, std::int64_t c, std::uint32_t seed)
      : gamma(t.both({c}, seed, 0.5f, 1.5f)),
        beta(t.both({c}, seed + 1)),
        mean(t.both({c}, seed + 2)),
        var(t.both({c}, seed + 3, 0.5f, 2.0f)) {}
};

std::size_t per_channel(const Shape& s) {
  return static_cast<std::size_t>(s[0] * s[2] * s[3]);
}

}  // namespace

TEST_P(OpSuite, BatchNormTrainingMatchesNaiveOnRandomShapes) {
  std::uint32_t seed = 100;
  for (const Shape& s : random_shapes(40, 1)) {
    if (per_channel(s) < 2) continue;  // training needs more than one value per channel
    const auto x = both(s, seed += 10, -2.0f, 3.0f);
    Channels bn(*this, s[1], seed + 1);
    auto y = out(s), save_mean = out({s[1]}), save_invstd = out({s[1]});
    const BatchNormParams p{1e-5f, 0.1f};
    be().batch_norm_forward_training(x.dut, bn.gamma.dut, bn.beta.dut, y.dut.tensor, bn.mean.dut,
                                     bn.var.dut, save_mean.dut.tensor, save_invstd.dut.tensor, p);
    cpu::naive::batch_norm_forward_training(x.ref, bn.gamma.ref, bn.beta.ref, y.ref, bn.mean.ref,
                                            bn.var.ref, save_mean.ref, save_invstd.ref, p);
    const Tolerance tol = tolerance(Accuracy::kNormalization, per_channel(s));
    const std::string what = shape_to_string(s);
    expect_output(y, tol, "y " + what);
    expect_output(save_mean, tol, "save_mean " + what);
    expect_output(save_invstd, tol, "save_invstd " + what);
    EXPECT_TRUE(close(bn.mean.dut, bn.mean.ref, tol, "running_mean " + what));
    EXPECT_TRUE(close(bn.var.dut, bn.var.ref, tol, "running_var " + what));
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, BatchNormInferenceMatchesNaiveOnRandomShapes) {
  std::uint32_t seed = 200;
  for (const Shape& s : random_shapes(40, 2)) {
    const auto x = both(s, seed += 10);
    Channels bn(*this, s[1], seed + 1);
    auto y = out(s);
    be().batch_norm_forward_inference(x.dut, bn.gamma.dut, bn.beta.dut, bn.mean.dut, bn.var.dut,
                                      y.dut.tensor, {});
    cpu::naive::batch_norm_forward_inference(x.ref, bn.gamma.ref, bn.beta.ref, bn.mean.ref,
                                             bn.var.ref, y.ref, {});
    expect_output(y, tolerance(Accuracy::kTranscendental), "inference " + shape_to_string(s));
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, BatchNormBackwardMatchesNaiveOnRandomShapes) {
  std::uint32_t seed = 300;
  for (const Shape& s : random_shapes(40, 3)) {
    if (per_channel(s) < 2) continue;  // one value per channel: the gradient is all rounding
    const auto x = both(s, seed += 10), dy = both(s, seed + 1);
    Channels bn(*this, s[1], seed + 2);
    // The saved statistics from the reference's forward, on both sides,
    // with an epsilon far from the default: a backend must take the forward's
    // (cuDNN's backward asks for it), not a constant of its own.
    const BatchNormParams p{0.25f, 0.1f};
    Tensor y(ref(), s), m(ref(), {s[1]}), is(ref(), {s[1]});
    cpu::naive::batch_norm_forward_training(x.ref, bn.gamma.ref, bn.beta.ref, y, bn.mean.ref,
                                            bn.var.ref, m, is, p);
    const Tensor m_dut = copy_to(be(), m), is_dut = copy_to(be(), is);
    auto dx = out(s), dgamma = out({s[1]}), dbeta = out({s[1]});
    be().batch_norm_backward(x.dut, dy.dut, bn.gamma.dut, m_dut, is_dut, dx.dut.tensor,
                             dgamma.dut.tensor, dbeta.dut.tensor, p);
    cpu::naive::batch_norm_backward(x.ref, dy.ref, bn.gamma.ref, m, is, dx.ref, dgamma.ref,
                                    dbeta.ref, p);
    const Tolerance tol = tolerance(Accuracy::kNormalization, per_channel(s));
    const std::string what = shape_to_string(s);
    expect_output(dx, tol, "dx " + what);
    expect_output(dgamma, tol, "dgamma " + what);
    expect_output(dbeta, tolerance(Accuracy::kReduction, per_channel(s)), "dbeta " + what);
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, BatchNormBackwardMatchesFiniteDifferences) {
  std::uint32_t seed = 400;
  for (const Shape& s : std::vector<Shape>{{2, 3, 2, 3}, {4, 2, 2, 2}, {1, 1, 3, 5}}) {
    const std::int64_t c = s[1];
    auto xv = random_values(static_cast<std::size_t>(shape_numel(s)), ++seed);
    auto gv = random_values(static_cast<std::size_t>(c), ++seed, 0.5f, 1.5f);
    auto bv = random_values(static_cast<std::size_t>(c), ++seed);
    const auto r = random_values(static_cast<std::size_t>(shape_numel(s)), ++seed);
    Tensor x = upload(be(), s, xv), gamma = upload(be(), {c}, gv), beta = upload(be(), {c}, bv);
    Tensor y(be(), s), rm(be(), {c}), rv(be(), {c}), m(be(), {c}), is(be(), {c});
    Tensor dy = upload(be(), s, r), dx(be(), s), dg(be(), {c}), db(be(), {c});
    be().batch_norm_forward_training(x, gamma, beta, y, rm, rv, m, is, {});
    be().batch_norm_backward(x, dy, gamma, m, is, dx, dg, db, {});
    auto loss = [&] {
      x.copy_from_host(xv.data());
      gamma.copy_from_host(gv.data());
      beta.copy_from_host(bv.data());
      be().batch_norm_forward_training(x, gamma, beta, y, rm, rv, m, is, {});
      return weighted_sum(y, r);
    };
    expect_gradient(xv, dx.to_vector(), loss, "dx " + shape_to_string(s));
    expect_gradient(gv, dg.to_vector(), loss, "dgamma " + shape_to_string(s));
    expect_gradient(bv, db.to_vector(), loss, "dbeta " + shape_to_string(s));
  }
}

TEST_P(OpSuite, BatchNormTrainingNormalizesToZeroMeanUnitVariance) {
  const Shape s{8, 2, 5, 5};
  Tensor x = random_tensor(be(), s, 3, 4.0f, 9.0f), y(be(), s);
  Tensor gamma(be(), {2}), beta(be(), {2}), rm(be(), {2}), rv(be(), {2}), m(be(), {2}),
      is(be(), {2});
  be().fill(gamma, 1.0f);
  be().fill(beta, 0.0f);
  be().fill(rm, 0.0f);
  be().fill(rv, 1.0f);
  be().batch_norm_forward_training(x, gamma, beta, y, rm, rv, m, is, {});
  const auto v = y.to_vector();
  for (int c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    for (int n = 0; n < 8; ++n)
      for (int i = 0; i < 25; ++i) {
        const double e = v[static_cast<std::size_t>((n * 2 + c) * 25 + i)];
        sum += e;
        sq += e * e;
      }
    EXPECT_NEAR(sum / 200, 0.0, 1e-5);
    EXPECT_NEAR(sq / 200, 1.0, 1e-3);  // eps = 1e-5 in the denominator
  }
}

TEST_P(OpSuite, BatchNormFrontDoorNamesTheBadTensor) {
  Tensor x(be(), {2, 3, 4, 4}), y(be(), {2, 3, 4, 4}), c3(be(), {3}), c2(be(), {2});
  Tensor m(be(), {3}), is(be(), {3}), rm(be(), {3}), rv(be(), {3});
  expect_invalid([&] { be().batch_norm_forward_training(x, c2, c3, y, rm, rv, m, is, {}); },
                 "'gamma'");
  expect_invalid([&] { be().batch_norm_forward_inference(x, c3, c3, rm, rv, x, {}); }, "overlaps");
  Tensor x2(be(), {2, 3});
  expect_invalid([&] { be().batch_norm_forward_inference(x2, c3, c3, rm, rv, y, {}); }, "rank 4");
}

}  // namespace stoke::testing
