// Linear and softmax cross-entropy against the naive reference and central
// differences; loss and accuracy values on a known case.
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"

namespace stoke::test {
namespace {

TEST(Linear, ForwardBackwardMatchNaive) {
  Backend& be = cpu_backend();
  const std::vector<std::array<std::int64_t, 3>> sizes = {{1, 1, 1}, {5, 7, 3}, {64, 128, 10}, {3, 33, 17}};
  std::uint32_t seed = 1;
  for (const auto& [n, k, m] : sizes) {
    Tensor x = random_tensor(be, {n, k}, ++seed), w = random_tensor(be, {m, k}, ++seed), b = random_tensor(be, {m}, ++seed);
    Tensor dy = random_tensor(be, {n, m}, ++seed);
    Guarded y(be, {n, m}), dx(be, {n, k}), dw(be, {m, k}), db(be, {m});
    Tensor ry(be, {n, m}), rdx(be, {n, k}), rdw(be, {m, k}), rdb(be, {m});
    be.linear_forward(x, w, b, y.tensor);
    be.linear_backward(x, w, dy, dx.tensor, dw.tensor, db.tensor);
    cpu::naive::linear_forward(x, w, b, ry);
    cpu::naive::linear_backward(x, w, dy, rdx, rdw, rdb);
    expect_close(y.tensor, ry, reduction_tolerance(static_cast<std::size_t>(k)), "y");
    expect_close(dx.tensor, rdx, reduction_tolerance(static_cast<std::size_t>(m)), "dx");
    expect_close(dw.tensor, rdw, reduction_tolerance(static_cast<std::size_t>(n)), "dw");
    expect_close(db.tensor, rdb, reduction_tolerance(static_cast<std::size_t>(n)), "db");
    for (auto* g : {&y, &dx, &dw, &db}) g->check("linear");
    if (n * k > 64) continue;
    const auto r = dy.to_vector();
    Tensor yy(be, {n, m});
    auto loss = [&] { be.linear_forward(x, w, b, yy); return weighted_sum(yy, r); };
    expect_gradient(x, dx.tensor, loss, "dx");
    expect_gradient(w, dw.tensor, loss, "dw");
    expect_gradient(b, db.tensor, loss, "db");
  }
}

Tensor labels_tensor(Backend& be, const std::vector<std::int32_t>& v) {
  Tensor t(be, {static_cast<std::int64_t>(v.size())}, DType::kInt32);
  t.copy_from_host(v.data());
  return t;
}

TEST(SoftmaxCrossEntropy, MatchesNaiveAndFiniteDifferences) {
  Backend& be = cpu_backend();
  const std::int64_t n = 6, c = 5;
  Tensor logits = random_tensor(be, {n, c}, 3, -3.0f, 3.0f);
  Tensor labels = labels_tensor(be, {0, 4, 2, 2, 1, 3});
  Guarded probs(be, {n, c}), dlogits(be, {n, c});
  Tensor loss(be, {1}), correct(be, {1}), rprobs(be, {n, c}), rloss(be, {1}), rcorrect(be, {1}), rd(be, {n, c});
  be.softmax_cross_entropy_forward(logits, labels, probs.tensor, loss, correct);
  be.softmax_cross_entropy_backward(probs.tensor, labels, dlogits.tensor);
  cpu::naive::softmax_cross_entropy_forward(logits, labels, rprobs, rloss, rcorrect);
  cpu::naive::softmax_cross_entropy_backward(rprobs, labels, rd);
  expect_close(probs.tensor, rprobs, reduction_tolerance(c), "probs");
  expect_close(loss, rloss, reduction_tolerance(n * c), "loss");
  expect_identical(correct, rcorrect, "correct");
  expect_close(dlogits.tensor, rd, reduction_tolerance(c), "dlogits");
  probs.check("probs");
  dlogits.check("dlogits");
  auto f = [&] {
    be.softmax_cross_entropy_forward(logits, labels, rprobs, rloss, rcorrect);
    return static_cast<double>(rloss.to_vector()[0]);
  };
  expect_gradient(logits, dlogits.tensor, f, "dlogits", 1e-2f);
}

TEST(SoftmaxCrossEntropy, KnownLossAndAccuracy) {
  Backend& be = cpu_backend();
  // Row 0: uniform over 4 classes -> loss ln 4, argmax 0 (first maximum) == label 0.
  // Row 1: class 2 dominant, label 1 -> wrong.
  const std::vector<float> v = {0, 0, 0, 0, 0, 0, 50, 0};
  Tensor logits(be, {2, 4});
  logits.copy_from_host(v.data());
  Tensor labels = labels_tensor(be, {0, 1});
  Tensor probs(be, {2, 4}), loss(be, {1}), correct(be, {1});
  be.softmax_cross_entropy_forward(logits, labels, probs, loss, correct);
  EXPECT_NEAR(loss.to_vector()[0], (std::log(4.0) + 50.0) / 2.0, 1e-4);
  EXPECT_EQ(correct.to_vector()[0], 1.0f);
  Tensor bad = labels_tensor(be, {0, 4});
  EXPECT_THROW(be.softmax_cross_entropy_forward(logits, bad, probs, loss, correct), InvalidArgument);
}

TEST(LinearAndLoss, SerialEqualsParallel) {
  cpu::CpuBackend serial;
  serial.set_execution(Execution::kSerial);
  Backend& par = cpu_backend();
  std::vector<float> out[2];
  int i = 0;
  for (Backend* be : {&par, static_cast<Backend*>(&serial)}) {
    Tensor x = random_tensor(*be, {37, 20}, 1), w = random_tensor(*be, {10, 20}, 2), b = random_tensor(*be, {10}, 3);
    Tensor y(*be, {37, 10}), probs(*be, {37, 10}), loss(*be, {1}), correct(*be, {1}), dl(*be, {37, 10});
    Tensor dx(*be, {37, 20}), dw(*be, {10, 20}), db(*be, {10});
    std::vector<std::int32_t> l(37);
    for (std::size_t k = 0; k < l.size(); ++k) l[k] = static_cast<std::int32_t>(k % 10);
    Tensor labels = labels_tensor(*be, l);
    be->linear_forward(x, w, b, y);
    be->softmax_cross_entropy_forward(y, labels, probs, loss, correct);
    be->softmax_cross_entropy_backward(probs, labels, dl);
    be->linear_backward(x, w, dl, dx, dw, db);
    for (const Tensor* t : {&y, &loss, &correct, &dx, &dw, &db}) {
      const auto v = t->to_vector();
      out[i].insert(out[i].end(), v.begin(), v.end());
    }
    ++i;
  }
  EXPECT_EQ(out[0], out[1]);
}

}  // namespace
}  // namespace stoke::test
