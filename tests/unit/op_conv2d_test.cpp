// conv2d: fast (im2col + sgemm) against the naive reference on randomized
// shapes, backward against central differences, guards, serial == parallel.
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"

namespace stoke::test {
namespace {

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
};

std::vector<ConvCase> random_cases(int count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<ConvCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    ConvCase c;
    c.p.groups = pick(1, 3);
    c.p.stride_h = pick(1, 2); c.p.stride_w = pick(1, 2);
    c.p.dilation_h = pick(1, 2); c.p.dilation_w = pick(1, 2);
    const int r = pick(1, 3), s = pick(1, 3);
    c.p.pad_h = pick(0, r / 2 + 1); c.p.pad_w = pick(0, s / 2 + 1);
    c.x = {pick(1, 3), c.p.groups * pick(1, 4), pick(3, 10), pick(3, 10)};
    c.w = {c.p.groups * pick(1, 4), c.x[1] / c.p.groups, r, s};
    if (conv_output_size(c.x[2], r, c.p.stride_h, c.p.pad_h, c.p.dilation_h) <= 0 ||
        conv_output_size(c.x[3], s, c.p.stride_w, c.p.pad_w, c.p.dilation_w) <= 0) continue;
    cases.push_back(c);
  }
  // The 1x1 direct path and the ResNet 3x3 shapes.
  cases.push_back({{2, 8, 6, 6}, {4, 8, 1, 1}, {}});
  cases.push_back({{2, 4, 9, 9}, {8, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 1}});
  cases.push_back({{3, 4, 9, 9}, {8, 4, 3, 3}, {2, 2, 1, 1, 1, 1, 1}});
  // Several small images per column matrix, with a partial last group.
  cases.push_back({{7, 4, 5, 5}, {6, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 1}});
  cases.push_back({{9, 6, 6, 6}, {4, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 2}});
  return cases;
}

std::string describe(const ConvCase& c) {
  return "x" + shape_to_string(c.x) + " w" + shape_to_string(c.w) + " stride " + std::to_string(c.p.stride_h) +
         "," + std::to_string(c.p.stride_w) + " pad " + std::to_string(c.p.pad_h) + "," + std::to_string(c.p.pad_w) +
         " dil " + std::to_string(c.p.dilation_h) + "," + std::to_string(c.p.dilation_w) + " groups " +
         std::to_string(c.p.groups);
}

TEST(Conv2d, ForwardMatchesNaiveOnRandomShapes) {
  Backend& be = cpu_backend();
  std::uint32_t seed = 100;
  for (const ConvCase& c : random_cases(40, 7)) {
    const Shape ys = cpu::conv2d_output_shape(c.x, c.w, c.p);
    Tensor x = random_tensor(be, c.x, ++seed), w = random_tensor(be, c.w, ++seed), b = random_tensor(be, {c.w[0]}, ++seed);
    Guarded y(be, ys);
    Tensor ref(be, ys);
    be.conv2d_forward(x, w, b, y.tensor, c.p);
    cpu::naive::conv2d_forward(x, w, b, ref, c.p);
    expect_close(y.tensor, ref, reduction_tolerance(static_cast<std::size_t>(c.w[1] * c.w[2] * c.w[3])), describe(c));
    y.check(describe(c));
  }
}

TEST(Conv2d, BackwardMatchesNaiveOnRandomShapes) {
  Backend& be = cpu_backend();
  std::uint32_t seed = 200;
  for (const ConvCase& c : random_cases(40, 8)) {
    const Shape ys = cpu::conv2d_output_shape(c.x, c.w, c.p);
    Tensor x = random_tensor(be, c.x, ++seed), w = random_tensor(be, c.w, ++seed), dy = random_tensor(be, ys, ++seed);
    Guarded dx(be, c.x), dw(be, c.w), db(be, {c.w[0]});
    Tensor rdx(be, c.x), rdw(be, c.w), rdb(be, {c.w[0]});
    be.conv2d_backward(x, w, dy, dx.tensor, dw.tensor, db.tensor, c.p);
    cpu::naive::conv2d_backward(x, w, dy, rdx, rdw, rdb, c.p);
    const std::size_t spatial = static_cast<std::size_t>(c.x[0] * ys[2] * ys[3]);
    expect_close(dx.tensor, rdx, reduction_tolerance(static_cast<std::size_t>(c.w[0] * c.w[2] * c.w[3])), "dx " + describe(c));
    expect_close(dw.tensor, rdw, reduction_tolerance(spatial), "dw " + describe(c));
    expect_close(db.tensor, rdb, reduction_tolerance(spatial), "db " + describe(c));
    dx.check("dx " + describe(c));
    dw.check("dw " + describe(c));
    db.check("db " + describe(c));
  }
}

TEST(Conv2d, BackwardMatchesFiniteDifferences) {
  Backend& be = cpu_backend();
  const std::vector<ConvCase> cases = {
      {{2, 2, 5, 5}, {3, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{1, 4, 6, 5}, {4, 2, 3, 2}, {2, 1, 1, 0, 1, 2, 2}},
      {{2, 3, 4, 4}, {2, 3, 1, 1}, {}},
  };
  std::uint32_t seed = 300;
  for (const ConvCase& c : cases) {
    const Shape ys = cpu::conv2d_output_shape(c.x, c.w, c.p);
    Tensor x = random_tensor(be, c.x, ++seed), w = random_tensor(be, c.w, ++seed), b = random_tensor(be, {c.w[0]}, ++seed);
    const auto r = random_values(static_cast<std::size_t>(shape_numel(ys)), ++seed);
    Tensor dy(be, ys);
    dy.copy_from_host(r.data());
    Tensor dx(be, c.x), dw(be, c.w), db(be, {c.w[0]}), y(be, ys);
    be.conv2d_backward(x, w, dy, dx, dw, db, c.p);
    auto loss = [&] {
      be.conv2d_forward(x, w, b, y, c.p);
      return weighted_sum(y, r);
    };
    expect_gradient(x, dx, loss, "dx " + describe(c));
    expect_gradient(w, dw, loss, "dw " + describe(c));
    expect_gradient(b, db, loss, "db " + describe(c));
  }
}

TEST(Conv2d, SerialEqualsParallel) {
  cpu::CpuBackend serial;
  serial.set_execution(Execution::kSerial);
  Backend& parallel = cpu_backend();
  const Shape xs{5, 6, 11, 9}, ws{8, 3, 3, 3};
  const Conv2dParams p{2, 1, 1, 1, 1, 1, 2};
  const Shape ys = cpu::conv2d_output_shape(xs, ws, p);
  Tensor xa = random_tensor(parallel, xs, 1), wa = random_tensor(parallel, ws, 2), dya = random_tensor(parallel, ys, 3);
  Tensor xb = random_tensor(serial, xs, 1), wb = random_tensor(serial, ws, 2), dyb = random_tensor(serial, ys, 3);
  Tensor none;
  Tensor ya(parallel, ys), yb(serial, ys), dxa(parallel, xs), dxb(serial, xs), dwa(parallel, ws), dwb(serial, ws),
      dba(parallel, {8}), dbb(serial, {8});
  parallel.conv2d_forward(xa, wa, none, ya, p);
  serial.conv2d_forward(xb, wb, none, yb, p);
  parallel.conv2d_backward(xa, wa, dya, dxa, dwa, dba, p);
  serial.conv2d_backward(xb, wb, dyb, dxb, dwb, dbb, p);
  expect_identical(ya, yb, "y");
  expect_identical(dxa, dxb, "dx");
  expect_identical(dwa, dwb, "dw");
  expect_identical(dba, dbb, "db");
}

TEST(Conv2d, RejectsMismatchedShapes) {
  Backend& be = cpu_backend();
  Tensor x(be, {1, 4, 5, 5}), w(be, {2, 3, 3, 3}), y(be, {1, 2, 3, 3}), none;
  EXPECT_THROW(be.conv2d_forward(x, w, none, y, {}), InvalidArgument);
  Tensor w2(be, {2, 4, 3, 3}), wrong_y(be, {1, 2, 4, 4});
  EXPECT_THROW(be.conv2d_forward(x, w2, none, wrong_y, {}), InvalidArgument);
}

TEST(Conv2d, WorkspaceIsReusedAcrossCalls) {
  cpu::CpuBackend be;
  Tensor x = random_tensor(be, {4, 4, 8, 8}, 1), w = random_tensor(be, {4, 4, 3, 3}, 2), y(be, {4, 4, 8, 8}), none;
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  be.conv2d_forward(x, w, none, y, p);
  const auto after_first = be.memory_stats();
  be.conv2d_forward(x, w, none, y, p);
  EXPECT_EQ(be.memory_stats().allocations, after_first.allocations);
  EXPECT_EQ(be.memory_stats().in_use_bytes, after_first.in_use_bytes);
  EXPECT_LE(be.memory_stats().peak_bytes,
            x.bytes() + w.bytes() + y.bytes() + be.conv2d_workspace_bytes(x.shape(), w.shape(), p));
}

}  // namespace
}  // namespace stoke::test
