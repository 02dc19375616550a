// Pooling: max, average and global average against the naive reference,
// backward against central differences, guards, serial == parallel.
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"

namespace stoke::test {
namespace {

const std::vector<std::pair<Shape, Pool2dParams>> kCases = {
    {{2, 3, 6, 6}, {2, 2, 2, 2, 0, 0}}, {{1, 2, 7, 5}, {3, 3, 2, 2, 1, 1}},
    {{2, 1, 5, 8}, {3, 2, 1, 2, 1, 0}}, {{3, 4, 9, 9}, {3, 3, 3, 3, 0, 0}},
};

TEST(Pool2d, ForwardAndBackwardMatchNaive) {
  Backend& be = cpu_backend();
  std::uint32_t seed = 1;
  for (const auto& [s, p] : kCases) {
    const Shape ys = pool2d_output_shape(s, p);
    Tensor x = random_tensor(be, s, ++seed), dy = random_tensor(be, ys, ++seed);
    Guarded ymax(be, ys), yavg(be, ys), dxmax(be, s), dxavg(be, s);
    Tensor rymax(be, ys), ryavg(be, ys), rdxmax(be, s), rdxavg(be, s);
    be.max_pool2d_forward(x, ymax.tensor, p);
    be.avg_pool2d_forward(x, yavg.tensor, p);
    be.max_pool2d_backward(x, ymax.tensor, dy, dxmax.tensor, p);
    be.avg_pool2d_backward(dy, dxavg.tensor, p);
    cpu::naive::max_pool2d_forward(x, rymax, p);
    cpu::naive::avg_pool2d_forward(x, ryavg, p);
    cpu::naive::max_pool2d_backward(x, rymax, dy, rdxmax, p);
    cpu::naive::avg_pool2d_backward(dy, rdxavg, p);
    const auto tol = reduction_tolerance(static_cast<std::size_t>(p.kernel_h * p.kernel_w));
    expect_identical(ymax.tensor, rymax, "max y");
    expect_close(yavg.tensor, ryavg, tol, "avg y");
    expect_close(dxmax.tensor, rdxmax, tol, "max dx");
    expect_close(dxavg.tensor, rdxavg, tol, "avg dx");
    for (auto* g : {&ymax, &yavg, &dxmax, &dxavg}) g->check("pool " + shape_to_string(s));
  }
}

TEST(Pool2d, BackwardMatchesFiniteDifferences) {
  Backend& be = cpu_backend();
  for (const auto& [s, p] : kCases) {
    const Shape ys = pool2d_output_shape(s, p);
    // Distinct values spaced more than 2h apart so the max does not switch.
    std::vector<float> v(static_cast<std::size_t>(shape_numel(s)));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.05f * static_cast<float>((i * 37) % v.size());
    Tensor x(be, s);
    x.copy_from_host(v.data());
    const auto r = random_values(static_cast<std::size_t>(shape_numel(ys)), 9);
    Tensor dy(be, ys), y(be, ys), dx(be, s);
    dy.copy_from_host(r.data());
    be.max_pool2d_forward(x, y, p);
    be.max_pool2d_backward(x, y, dy, dx, p);
    expect_gradient(x, dx, [&] { be.max_pool2d_forward(x, y, p); return weighted_sum(y, r); }, "max", 1e-2f);
    be.avg_pool2d_backward(dy, dx, p);
    expect_gradient(x, dx, [&] { be.avg_pool2d_forward(x, y, p); return weighted_sum(y, r); }, "avg");
  }
}

TEST(GlobalAvgPool, MatchesNaiveAndFiniteDifferences) {
  Backend& be = cpu_backend();
  const Shape s{3, 5, 4, 6};
  Tensor x = random_tensor(be, s, 4), dy = random_tensor(be, {3, 5}, 5);
  Guarded y(be, {3, 5}), dx(be, s);
  Tensor ry(be, {3, 5}), rdx(be, s);
  be.global_avg_pool_forward(x, y.tensor);
  be.global_avg_pool_backward(dy, dx.tensor);
  cpu::naive::global_avg_pool_forward(x, ry);
  cpu::naive::global_avg_pool_backward(dy, rdx);
  expect_close(y.tensor, ry, reduction_tolerance(24), "y");
  expect_close(dx.tensor, rdx, kElementwise, "dx");
  y.check("y");
  dx.check("dx");
  const auto r = dy.to_vector();
  Tensor yy(be, {3, 5});
  expect_gradient(x, dx.tensor, [&] { be.global_avg_pool_forward(x, yy); return weighted_sum(yy, r); }, "gap");
}

TEST(Pool2d, SerialEqualsParallel) {
  cpu::CpuBackend serial;
  serial.set_execution(Execution::kSerial);
  Backend& par = cpu_backend();
  const Shape s{4, 6, 9, 9};
  const Pool2dParams p{3, 3, 2, 2, 1, 1};
  const Shape ys = pool2d_output_shape(s, p);
  Tensor xa = random_tensor(par, s, 1), xb = random_tensor(serial, s, 1);
  Tensor ya(par, ys), yb(serial, ys);
  par.avg_pool2d_forward(xa, ya, p);
  serial.avg_pool2d_forward(xb, yb, p);
  expect_identical(ya, yb, "avg");
}

}  // namespace
}  // namespace stoke::test
