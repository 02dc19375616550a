// batch norm: fast against naive (training, inference, backward), backward
// against central differences, running statistics, serial == parallel.
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"

namespace stoke::test {
namespace {

struct Bn {
  Tensor gamma, beta, rm, rv, mean, invstd;
  Bn(Backend& be, std::int64_t c, std::uint32_t seed)
      : gamma(random_tensor(be, {c}, seed, 0.5f, 1.5f)), beta(random_tensor(be, {c}, seed + 1)),
        rm(random_tensor(be, {c}, seed + 2)), rv(random_tensor(be, {c}, seed + 3, 0.5f, 2.0f)),
        mean(be, {c}), invstd(be, {c}) {}
};

const std::vector<Shape> kShapes = {{2, 3, 4, 5}, {4, 1, 3, 3}, {1, 7, 2, 9}, {3, 16, 7, 7}};

TEST(BatchNorm, TrainingForwardMatchesNaive) {
  Backend& be = cpu_backend();
  std::uint32_t seed = 10;
  for (const Shape& s : kShapes) {
    Tensor x = random_tensor(be, s, seed += 10, -2.0f, 3.0f);
    Bn a(be, s[1], seed), b(be, s[1], seed);
    Guarded y(be, s);
    Tensor ry(be, s);
    const BatchNormParams p{1e-5f, 0.1f};
    be.batch_norm_forward_training(x, a.gamma, a.beta, y.tensor, a.rm, a.rv, a.mean, a.invstd, p);
    cpu::naive::batch_norm_forward_training(x, b.gamma, b.beta, ry, b.rm, b.rv, b.mean, b.invstd, p);
    const auto tol = reduction_tolerance(static_cast<std::size_t>(s[0] * s[2] * s[3]));
    expect_close(y.tensor, ry, tol, "y " + shape_to_string(s));
    expect_close(a.rm, b.rm, tol, "running mean");
    expect_close(a.rv, b.rv, tol, "running var");
    expect_close(a.invstd, b.invstd, tol, "invstd");
    y.check("y");
  }
}

TEST(BatchNorm, TrainingNormalizesToZeroMeanUnitVariance) {
  Backend& be = cpu_backend();
  const Shape s{8, 2, 5, 5};
  Tensor x = random_tensor(be, s, 3, 4.0f, 9.0f), y(be, s);
  Bn bn(be, 2, 4);
  be.fill(bn.gamma, 1.0f);
  be.fill(bn.beta, 0.0f);
  be.batch_norm_forward_training(x, bn.gamma, bn.beta, y, bn.rm, bn.rv, bn.mean, bn.invstd, {});
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

TEST(BatchNorm, InferenceMatchesNaive) {
  Backend& be = cpu_backend();
  for (const Shape& s : kShapes) {
    Tensor x = random_tensor(be, s, 5);
    Bn bn(be, s[1], 6);
    Guarded y(be, s);
    Tensor ry(be, s);
    be.batch_norm_forward_inference(x, bn.gamma, bn.beta, bn.rm, bn.rv, y.tensor, {});
    cpu::naive::batch_norm_forward_inference(x, bn.gamma, bn.beta, bn.rm, bn.rv, ry, {});
    expect_close(y.tensor, ry, reduction_tolerance(4), "inference " + shape_to_string(s));
    y.check("inference");
  }
}

TEST(BatchNorm, BackwardMatchesNaiveAndFiniteDifferences) {
  Backend& be = cpu_backend();
  std::uint32_t seed = 70;
  for (const Shape& s : kShapes) {
    Tensor x = random_tensor(be, s, ++seed), dy = random_tensor(be, s, ++seed);
    Bn bn(be, s[1], ++seed);
    Tensor y(be, s);
    be.batch_norm_forward_training(x, bn.gamma, bn.beta, y, bn.rm, bn.rv, bn.mean, bn.invstd, {});
    Guarded dx(be, s), dg(be, {s[1]}), dbt(be, {s[1]});
    Tensor rdx(be, s), rdg(be, {s[1]}), rdb(be, {s[1]});
    be.batch_norm_backward(x, dy, bn.gamma, bn.mean, bn.invstd, dx.tensor, dg.tensor, dbt.tensor);
    cpu::naive::batch_norm_backward(x, dy, bn.gamma, bn.mean, bn.invstd, rdx, rdg, rdb);
    const auto tol = reduction_tolerance(static_cast<std::size_t>(s[0] * s[2] * s[3]));
    expect_close(dx.tensor, rdx, {tol.abs * 4, tol.rel * 4, "dx sums two reductions"}, "dx");
    expect_close(dg.tensor, rdg, tol, "dgamma");
    expect_close(dbt.tensor, rdb, tol, "dbeta");
    dx.check("dx");
    dg.check("dgamma");
    dbt.check("dbeta");
    if (s[0] * s[2] * s[3] > 64) continue;  // finite differences on the small shapes only
    const auto r = dy.to_vector();
    Tensor rm_scratch(be, {s[1]}), rv_scratch(be, {s[1]}), m(be, {s[1]}), is(be, {s[1]});
    auto loss = [&] {
      be.batch_norm_forward_training(x, bn.gamma, bn.beta, y, rm_scratch, rv_scratch, m, is, {});
      return weighted_sum(y, r);
    };
    expect_gradient(x, dx.tensor, loss, "dx " + shape_to_string(s), 1e-2f);
    expect_gradient(bn.gamma, dg.tensor, loss, "dgamma");
    expect_gradient(bn.beta, dbt.tensor, loss, "dbeta");
  }
}

TEST(BatchNorm, SerialEqualsParallel) {
  cpu::CpuBackend serial;
  serial.set_execution(Execution::kSerial);
  Backend& par = cpu_backend();
  const Shape s{4, 9, 6, 6};
  Tensor xa = random_tensor(par, s, 1), xb = random_tensor(serial, s, 1);
  Tensor dya = random_tensor(par, s, 2), dyb = random_tensor(serial, s, 2);
  Bn a(par, 9, 3), b(serial, 9, 3);
  Tensor ya(par, s), yb(serial, s), dxa(par, s), dxb(serial, s), ga(par, {9}), gb(serial, {9}), ba(par, {9}),
      bb(serial, {9});
  par.batch_norm_forward_training(xa, a.gamma, a.beta, ya, a.rm, a.rv, a.mean, a.invstd, {});
  serial.batch_norm_forward_training(xb, b.gamma, b.beta, yb, b.rm, b.rv, b.mean, b.invstd, {});
  par.batch_norm_backward(xa, dya, a.gamma, a.mean, a.invstd, dxa, ga, ba);
  serial.batch_norm_backward(xb, dyb, b.gamma, b.mean, b.invstd, dxb, gb, bb);
  expect_identical(ya, yb, "y");
  expect_identical(dxa, dxb, "dx");
  expect_identical(ga, gb, "dgamma");
}

}  // namespace
}  // namespace stoke::test
