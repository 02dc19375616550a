// What only the CPU backend promises (the op suite checks every backend's
// results): serial execution equals parallel execution bit for bit, the
// convolution workspace is kept between calls, and the optimizers'
// prepare + apply equals step.
#include <array>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/nn.hpp"
#include "unit/op_test_util.hpp"

namespace stoke::testing {
namespace {

TEST(CpuBackend, ConvolutionSerialEqualsParallel) {
  cpu::CpuBackend serial;
  serial.set_execution(Execution::kSerial);
  Backend& parallel = cpu_backend();
  const Shape xs{5, 6, 11, 9}, ws{8, 3, 3, 3};
  const Conv2dParams p{2, 1, 1, 1, 1, 1, 2};
  const Shape ys = conv2d_output_shape(xs, ws, p);
  Tensor xa = random_tensor(parallel, xs, 1), wa = random_tensor(parallel, ws, 2),
         dya = random_tensor(parallel, ys, 3);
  Tensor xb = random_tensor(serial, xs, 1), wb = random_tensor(serial, ws, 2),
         dyb = random_tensor(serial, ys, 3);
  Tensor none;
  Tensor ya(parallel, ys), yb(serial, ys), dxa(parallel, xs), dxb(serial, xs), dwa(parallel, ws),
      dwb(serial, ws), dba(parallel, {8}), dbb(serial, {8});
  parallel.conv2d_forward(xa, wa, none, ya, p);
  serial.conv2d_forward(xb, wb, none, yb, p);
  parallel.conv2d_backward(xa, wa, dya, dxa, dwa, dba, p);
  serial.conv2d_backward(xb, wb, dyb, dxb, dwb, dbb, p);
  expect_identical(ya, yb, "y");
  expect_identical(dxa, dxb, "dx");
  expect_identical(dwa, dwb, "dw");
  expect_identical(dba, dbb, "db");
}

TEST(CpuBackend, ConvolutionWorkspaceIsReusedAcrossCalls) {
  cpu::CpuBackend be;
  Tensor x = random_tensor(be, {4, 4, 8, 8}, 1), w = random_tensor(be, {4, 4, 3, 3}, 2),
         y(be, {4, 4, 8, 8}), none;
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  be.conv2d_forward(x, w, none, y, p);
  const auto after_first = be.memory_stats();
  be.conv2d_forward(x, w, none, y, p);
  EXPECT_EQ(be.memory_stats().allocations, after_first.allocations);
  EXPECT_EQ(be.memory_stats().in_use_bytes, after_first.in_use_bytes);
  EXPECT_LE(be.memory_stats().peak_bytes,
            x.bytes() + w.bytes() + y.bytes() + be.conv2d_workspace_bytes(x.shape(), w.shape(), p));
}

TEST(CpuBackend, BatchNormSerialEqualsParallel) {
  cpu::CpuBackend serial;
  serial.set_execution(Execution::kSerial);
  Backend& par = cpu_backend();
  const Shape s{4, 9, 6, 6};
  std::array<std::vector<float>, 2> results;
  int i = 0;
  for (Backend* be : {&par, static_cast<Backend*>(&serial)}) {
    Tensor x = random_tensor(*be, s, 1), dy = random_tensor(*be, s, 2), y(*be, s), dx(*be, s);
    Tensor gamma = random_tensor(*be, {9}, 3, 0.5f, 1.5f), beta = random_tensor(*be, {9}, 4);
    Tensor rm(*be, {9}), rv(*be, {9}), m(*be, {9}), is(*be, {9}), dg(*be, {9}), db(*be, {9});
    be->fill(rm, 0.0f);
    be->fill(rv, 1.0f);
    be->batch_norm_forward_training(x, gamma, beta, y, rm, rv, m, is, {});
    be->batch_norm_backward(x, dy, gamma, m, is, dx, dg, db, {});
    for (const Tensor* t : {&y, &rm, &rv, &dx, &dg, &db}) {
      const auto v = t->to_vector();
      results[static_cast<std::size_t>(i)].insert(results[static_cast<std::size_t>(i)].end(),
                                                  v.begin(), v.end());
    }
    ++i;
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(CpuBackend, PoolingSerialEqualsParallel) {
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

TEST(CpuBackend, LinearAndLossSerialEqualsParallel) {
  cpu::CpuBackend serial;
  serial.set_execution(Execution::kSerial);
  Backend& par = cpu_backend();
  std::vector<float> out[2];
  int i = 0;
  for (Backend* be : {&par, static_cast<Backend*>(&serial)}) {
    Tensor x = random_tensor(*be, {37, 20}, 1), w = random_tensor(*be, {10, 20}, 2),
           b = random_tensor(*be, {10}, 3);
    Tensor y(*be, {37, 10}), probs(*be, {37, 10}), loss(*be, {1}), correct(*be, {1}),
        dl(*be, {37, 10});
    Tensor dx(*be, {37, 20}), dw(*be, {10, 20}), db(*be, {10});
    std::vector<std::int32_t> l(37);
    for (std::size_t k = 0; k < l.size(); ++k) l[k] = static_cast<std::int32_t>(k % 10);
    Tensor labels = upload(*be, {37}, l);
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

// Optimizer::step == prepare + apply, and apply() uses the values of the
// latest prepare(): the step count advances in prepare, once per step.
TEST(CpuBackend, OptimizerPrepareThenApplyEqualsStep) {
  Backend& be = cpu_backend();
  nn::ModelSpec spec;
  spec.height = spec.width = 8;
  spec.classes = 3;
  spec.stem_width = 4;
  spec.widths = {4};
  spec.strides = {1};
  spec.blocks_per_stage = 1;
  for (bool adam : {false, true}) {
    auto a = nn::build_model(be, spec, 5), b = nn::build_model(be, spec, 5);
    std::unique_ptr<nn::Optimizer> oa, ob;
    if (adam) {
      oa = std::make_unique<nn::Adam>(*a);
      ob = std::make_unique<nn::Adam>(*b);
    } else {
      oa = std::make_unique<nn::Sgd>(*a);
      ob = std::make_unique<nn::Sgd>(*b);
    }
    for (int s = 0; s < 3; ++s) {
      const float lr = 0.01f * static_cast<float>(s + 1);
      Tensor ga = random_tensor(be, a->gradients().shape(), 30 + static_cast<std::uint32_t>(s));
      a->gradients().copy_from_host(ga.raw());
      b->gradients().copy_from_host(ga.raw());
      oa->step(*a, lr);
      ob->prepare(0.5f);  // superseded before the update is issued
      ob->set_steps(ob->steps() - 1);
      ob->prepare(lr);
      ob->apply(*b);
    }
    EXPECT_EQ(oa->steps(), 3);
    EXPECT_EQ(ob->steps(), 3);
    EXPECT_EQ(a->parameters().to_vector(), b->parameters().to_vector()) << (adam ? "adam" : "sgd");
  }
}

}  // namespace
}  // namespace stoke::testing
