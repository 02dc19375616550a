// Linear layers and softmax cross-entropy on every backend against the naive
// reference on random sizes, against central differences, and on a case with
// a known loss and accuracy.
#include <array>

#include "unit/op_suite.hpp"

namespace stoke::testing {

TEST_P(OpSuite, LinearForwardBackwardMatchNaiveOnRandomSizes) {
  std::vector<std::array<std::int64_t, 3>> sizes = {
      {1, 1, 1}, {5, 7, 3}, {64, 128, 10}, {3, 33, 17}};
  ShapeRng rng(3);
  for (int i = 0; i < 40; ++i) sizes.push_back({rng.pick(1, 40), rng.pick(1, 70), rng.pick(1, 20)});
  std::uint32_t seed = 1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto [n, k, m] = sizes[i];
    const bool bias = i % 4 != 1, want_dx = i % 5 != 2;
    const auto x = both({n, k}, ++seed), w = both({m, k}, ++seed), b = both({m}, ++seed),
               dy = both({n, m}, ++seed);
    auto y = out({n, m}), dx = out({n, k}), dw = out({m, k}), db = out({m});
    const Tensor none;
    Tensor none_dut, none_ref;
    be().linear_forward(x.dut, w.dut, bias ? b.dut : none, y.dut.tensor);
    be().linear_backward(x.dut, w.dut, dy.dut, want_dx ? dx.dut.tensor : none_dut, dw.dut.tensor,
                         db.dut.tensor);
    cpu::naive::linear_forward(x.ref, w.ref, bias ? b.ref : none, y.ref);
    cpu::naive::linear_backward(x.ref, w.ref, dy.ref, want_dx ? dx.ref : none_ref, dw.ref, db.ref);
    const std::string what =
        "n " + std::to_string(n) + " k " + std::to_string(k) + " m " + std::to_string(m);
    expect_output(y, tolerance(Accuracy::kReduction, static_cast<std::size_t>(k)), "y " + what);
    if (want_dx)
      expect_output(dx, tolerance(Accuracy::kReduction, static_cast<std::size_t>(m)), "dx " + what);
    expect_output(dw, tolerance(Accuracy::kReduction, static_cast<std::size_t>(n)), "dw " + what);
    expect_output(db, tolerance(Accuracy::kReduction, static_cast<std::size_t>(n)), "db " + what);
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, LinearBackwardMatchesFiniteDifferences) {
  const std::int64_t n = 3, k = 5, m = 4;
  auto xv = random_values(n * k, 1), wv = random_values(m * k, 2), bv = random_values(m, 3);
  const auto r = random_values(n * m, 4);
  Tensor x = upload(be(), {n, k}, xv), w = upload(be(), {m, k}, wv), b = upload(be(), {m}, bv);
  Tensor dy = upload(be(), {n, m}, r), y(be(), {n, m}), dx(be(), {n, k}), dw(be(), {m, k}),
         db(be(), {m});
  be().linear_backward(x, w, dy, dx, dw, db);
  auto loss = [&] {
    x.copy_from_host(xv.data());
    w.copy_from_host(wv.data());
    b.copy_from_host(bv.data());
    be().linear_forward(x, w, b, y);
    return weighted_sum(y, r);
  };
  expect_gradient(xv, dx.to_vector(), loss, "dx");
  expect_gradient(wv, dw.to_vector(), loss, "dw");
  expect_gradient(bv, db.to_vector(), loss, "db");
}

TEST_P(OpSuite, SoftmaxCrossEntropyMatchesNaiveOnRandomSizes) {
  ShapeRng rng(4);
  std::uint32_t seed = 50;
  for (int i = 0; i < 40; ++i) {
    const std::int64_t n = i == 0 ? 1 : rng.pick(1, 70), c = i == 1 ? 1 : rng.pick(1, 40);
    const auto logits = both({n, c}, ++seed, -4.0f, 4.0f);
    const auto labels = both_labels(n, static_cast<int>(c), ++seed);
    auto probs = out({n, c}), loss = out({1}), correct = out({1}), dlogits = out({n, c});
    be().softmax_cross_entropy_forward(logits.dut, labels.dut, probs.dut.tensor, loss.dut.tensor,
                                       correct.dut.tensor);
    be().softmax_cross_entropy_backward(probs.dut.tensor, labels.dut, dlogits.dut.tensor);
    cpu::naive::softmax_cross_entropy_forward(logits.ref, labels.ref, probs.ref, loss.ref,
                                              correct.ref);
    cpu::naive::softmax_cross_entropy_backward(probs.ref, labels.ref, dlogits.ref);
    const std::string what = "n " + std::to_string(n) + " c " + std::to_string(c);
    const auto row = static_cast<std::size_t>(c);
    expect_output(probs, tolerance(Accuracy::kTranscendental, row), "probs " + what);
    expect_output(loss, tolerance(Accuracy::kReduction, static_cast<std::size_t>(n * c)),
                  "loss " + what);
    expect_output(correct, tolerance(Accuracy::kExact), "correct " + what);
    expect_output(dlogits, tolerance(Accuracy::kTranscendental, row), "dlogits " + what);
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, SoftmaxCrossEntropyGradientMatchesFiniteDifferences) {
  const std::int64_t n = 6, c = 5;
  auto lv = random_values(n * c, 3, -3.0f, 3.0f);
  const std::vector<std::int32_t> lab = {0, 4, 2, 2, 1, 3};
  Tensor logits = upload(be(), {n, c}, lv), labels = upload(be(), {n}, lab);
  Tensor probs(be(), {n, c}), loss(be(), {1}), correct(be(), {1}), dlogits(be(), {n, c});
  be().softmax_cross_entropy_forward(logits, labels, probs, loss, correct);
  be().softmax_cross_entropy_backward(probs, labels, dlogits);
  expect_gradient(
      lv, dlogits.to_vector(),
      [&] {
        logits.copy_from_host(lv.data());
        be().softmax_cross_entropy_forward(logits, labels, probs, loss, correct);
        return static_cast<double>(loss.to_vector()[0]);
      },
      "dlogits");
}

TEST_P(OpSuite, SoftmaxCrossEntropyKnownLossAndAccuracy) {
  // Row 0: uniform over 4 classes -> loss ln 4, argmax 0 (first maximum) == label 0.
  // Row 1: class 2 dominant, label 1 -> wrong.
  Tensor logits = upload(be(), {2, 4}, std::vector<float>{0, 0, 0, 0, 0, 0, 50, 0});
  Tensor labels = upload(be(), {2}, std::vector<std::int32_t>{0, 1});
  Tensor probs(be(), {2, 4}), loss(be(), {1}), correct(be(), {1});
  be().softmax_cross_entropy_forward(logits, labels, probs, loss, correct);
  EXPECT_NEAR(loss.to_vector()[0], (std::log(4.0) + 50.0) / 2.0, 1e-4);
  EXPECT_EQ(correct.to_vector()[0], 1.0f);
  Tensor short_labels = upload(be(), {1}, std::vector<std::int32_t>{0});
  expect_invalid(
      [&] { be().softmax_cross_entropy_forward(logits, short_labels, probs, loss, correct); },
      "'labels'");
  Tensor float_labels(be(), {2});
  expect_invalid(
      [&] { be().softmax_cross_entropy_forward(logits, float_labels, probs, loss, correct); },
      "int32");
  if (be().is_host()) {  // label values are checked where they are read (a GPU kernel cannot throw)
    Tensor bad = upload(be(), {2}, std::vector<std::int32_t>{0, 4});
    EXPECT_THROW(be().softmax_cross_entropy_forward(logits, bad, probs, loss, correct),
                 InvalidArgument);
  }
}

TEST_P(OpSuite, LinearFrontDoorNamesTheBadTensor) {
  Tensor x(be(), {3, 4}), w(be(), {2, 5}), y(be(), {3, 2});
  expect_invalid([&] { be().linear_forward(x, w, Tensor(), y); }, "(M, K)");
  Tensor w2(be(), {2, 4}), y2(be(), {2, 3});
  expect_invalid([&] { be().linear_forward(x, w2, Tensor(), y2); }, "'y'");
}

}  // namespace stoke::testing
