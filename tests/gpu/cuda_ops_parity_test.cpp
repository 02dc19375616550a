// Every CUDA op, forward and backward, against the CPU backend on seeded
// random shapes (strict FP32), with guard values around every GPU output.
#include <cmath>

#include "gpu/cuda_parity.hpp"
#include "stoke/error.hpp"

namespace stoke::testing {
namespace {

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
  bool bias;
};

TEST_F(CudaParity, Conv2dForwardAndBackwardMatchTheCpu) {
  const ConvCase cases[] = {
      {{2, 3, 9, 11}, {8, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true},
      {{3, 8, 16, 16}, {16, 8, 3, 3}, {2, 2, 1, 1, 1, 1, 1}, false},
      {{2, 16, 8, 8}, {32, 16, 1, 1}, {2, 2, 0, 0, 1, 1, 1}, true},   // ResNet projection shortcut
      {{2, 4, 12, 10}, {6, 2, 3, 3}, {1, 1, 2, 2, 2, 2, 2}, true},    // grouped and dilated
      {{4, 3, 32, 32}, {16, 3, 7, 7}, {2, 2, 3, 3, 1, 1, 1}, false},  // a 7x7 stem
  };
  std::uint32_t seed = 100;
  for (const ConvCase& c : cases) {
    const std::string what = shape_to_string(c.x) + " * " + shape_to_string(c.w);
    const Tensor x = random(c.x, ++seed), w = random(c.w, ++seed), b = random({c.w[0]}, ++seed);
    const Shape ys = {
        c.x[0], c.w[0],
        conv_output_size(c.x[2], static_cast<int>(c.w[2]), c.p.stride_h, c.p.pad_h, c.p.dilation_h),
        conv_output_size(c.x[3], static_cast<int>(c.w[3]), c.p.stride_w, c.p.pad_w,
                         c.p.dilation_w)};
    Tensor y(cpu(), ys);
    const Tensor no_bias;
    cpu().conv2d_forward(x, w, c.bias ? b : no_bias, y, c.p);
    const Tensor gx = to_gpu(x), gw = to_gpu(w), gb = to_gpu(b);
    Guarded gy = guarded(ys);
    gpu().conv2d_forward(gx, gw, c.bias ? gb : no_bias, gy.view, c.p);
    EXPECT_TRUE(close(gy.view, y, kConv, "conv2d_forward " + what));
    EXPECT_TRUE(guards_intact(gy, "conv2d_forward y"));

    const Tensor dy = random(ys, ++seed);
    Tensor dx(cpu(), c.x), dw(cpu(), c.w), db(cpu(), {c.w[0]});
    cpu().conv2d_backward(x, w, dy, dx, dw, db, c.p);
    Guarded gdx = guarded(c.x), gdw = guarded(c.w), gdb = guarded({c.w[0]});
    gpu().conv2d_backward(gx, gw, to_gpu(dy), gdx.view, gdw.view, gdb.view, c.p);
    EXPECT_TRUE(close(gdx.view, dx, kConv, "conv2d_backward dx " + what));
    EXPECT_TRUE(close(gdw.view, dw, kConv, "conv2d_backward dw " + what));
    EXPECT_TRUE(close(gdb.view, db, kGemm, "conv2d_backward db " + what));
    EXPECT_TRUE(guards_intact(gdx, "dx"));
    EXPECT_TRUE(guards_intact(gdw, "dw"));
    EXPECT_TRUE(guards_intact(gdb, "db"));
  }
  // Every pass of every shape got an FMA-only (strict) algorithm.
  for (const ConvAlgoChoice& a : gpu().conv_algorithms()) {
    EXPECT_FALSE(a.tensor_ops) << a.pass << " " << a.key << " uses " << a.algorithm_name;
  }
}

TEST_F(CudaParity, BatchNormTrainingInferenceAndBackwardMatchTheCpu) {
  for (const Shape& s : {Shape{4, 6, 5, 7}, Shape{2, 16, 8, 8}, Shape{8, 3, 1, 1}}) {
    const std::string what = shape_to_string(s);
    const Shape c{s[1]};
    const Tensor x = random(s, 1, -2.0f, 3.0f), gamma = random(c, 2, 0.5f, 1.5f),
                 beta = random(c, 3);
    const BatchNormParams p{1e-5f, 0.1f};
    Tensor y(cpu(), s), rm = random(c, 4), rv = random(c, 5, 0.5f, 2.0f), sm(cpu(), c),
                        si(cpu(), c);
    Tensor grm = to_gpu(rm), grv = to_gpu(rv);
    cpu().batch_norm_forward_training(x, gamma, beta, y, rm, rv, sm, si, p);
    const Tensor gx = to_gpu(x), gg = to_gpu(gamma), gbeta = to_gpu(beta);
    Guarded gy = guarded(s), gsm = guarded(c), gsi = guarded(c);
    gpu().batch_norm_forward_training(gx, gg, gbeta, gy.view, grm, grv, gsm.view, gsi.view, p);
    EXPECT_TRUE(close(gy.view, y, kBatchNorm, "bn y " + what));
    EXPECT_TRUE(close(grm, rm, kBatchNorm, "bn running_mean " + what));
    EXPECT_TRUE(close(grv, rv, kBatchNorm, "bn running_var (unbiased) " + what));
    EXPECT_TRUE(close(gsm.view, sm, kBatchNorm, "bn save_mean " + what));
    EXPECT_TRUE(close(gsi.view, si, kBatchNorm, "bn save_invstd " + what));
    EXPECT_TRUE(guards_intact(gy, "bn y") && guards_intact(gsm, "save_mean") &&
                guards_intact(gsi, "save_invstd"));

    Tensor yi(cpu(), s);
    cpu().batch_norm_forward_inference(x, gamma, beta, rm, rv, yi, p);
    Guarded gyi = guarded(s);
    gpu().batch_norm_forward_inference(gx, gg, gbeta, grm, grv, gyi.view, p);
    EXPECT_TRUE(close(gyi.view, yi, kBatchNorm, "bn inference " + what));

    const Tensor dy = random(s, 6);
    Tensor dx(cpu(), s), dg(cpu(), c), db(cpu(), c);
    cpu().batch_norm_backward(x, dy, gamma, sm, si, dx, dg, db);
    Guarded gdx = guarded(s), gdg = guarded(c), gdb = guarded(c);
    gpu().batch_norm_backward(gx, to_gpu(dy), gg, gsm.view, gsi.view, gdx.view, gdg.view, gdb.view);
    EXPECT_TRUE(close(gdx.view, dx, kBatchNorm, "bn dx " + what));
    EXPECT_TRUE(close(gdg.view, dg, kBatchNorm, "bn dgamma " + what));
    EXPECT_TRUE(close(gdb.view, db, kBatchNorm, "bn dbeta " + what));
    EXPECT_TRUE(guards_intact(gdx, "bn dx") && guards_intact(gdg, "dgamma") &&
                guards_intact(gdb, "dbeta"));
  }
}

TEST_F(CudaParity, ReluAddAccumulateAndDropoutMatchTheCpu) {
  const Shape s{3, 5, 7, 9};
  const Tensor a = random(s, 11), b = random(s, 12), dy = random(s, 13);
  const Tensor ga = to_gpu(a), gb = to_gpu(b), gdy = to_gpu(dy);
  Tensor y(cpu(), s), dx(cpu(), s);
  Guarded gy = guarded(s), gdx = guarded(s);
  cpu().relu_forward(a, y);
  gpu().relu_forward(ga, gy.view);
  EXPECT_TRUE(close(gy.view, y, kExact, "relu_forward"));
  cpu().relu_backward(y, dy, dx);
  gpu().relu_backward(gy.view, gdy, gdx.view);
  EXPECT_TRUE(close(gdx.view, dx, kExact, "relu_backward"));
  cpu().add(a, b, y);
  gpu().add(ga, gb, gy.view);
  EXPECT_TRUE(close(gy.view, y, kExact, "add"));
  cpu().accumulate(y, dy);
  gpu().accumulate(gy.view, gdy);
  EXPECT_TRUE(close(gy.view, y, kElementwise, "accumulate"));
  cpu().scale(y, 1.0f / 3.0f);
  gpu().scale(gy.view, 1.0f / 3.0f);
  EXPECT_TRUE(close(gy.view, y, kExact, "scale (one multiply)"));
  Tensor mask(cpu(), s);
  Guarded gmask = guarded(s);
  for (float p : {0.0f, 0.25f, 0.5f}) {
    cpu().dropout_forward(a, y, mask, p, 1234);
    gpu().dropout_forward(ga, gy.view, gmask.view, p, 1234);
    EXPECT_TRUE(close(gmask.view, mask, kExact, "dropout mask (same counter-based uniform)"));
    EXPECT_TRUE(close(gy.view, y, kExact, "dropout_forward"));
    cpu().dropout_backward(dy, mask, dx);
    gpu().dropout_backward(gdy, gmask.view, gdx.view);
    EXPECT_TRUE(close(gdx.view, dx, kExact, "dropout_backward"));
  }
  EXPECT_TRUE(guards_intact(gy, "y") && guards_intact(gdx, "dx") && guards_intact(gmask, "mask"));
}

TEST_F(CudaParity, PoolingMatchesTheCpu) {
  const Shape s{2, 3, 13, 11};
  const Tensor x = random(s, 21), gx = to_gpu(x);
  for (const Pool2dParams& p : {Pool2dParams{2, 2, 2, 2, 0, 0}, Pool2dParams{3, 3, 2, 2, 1, 1},
                                Pool2dParams{3, 2, 1, 2, 1, 0}}) {
    const std::string what = std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) + " s" +
                             std::to_string(p.stride_h) + " p" + std::to_string(p.pad_h);
    const Shape ys{s[0], s[1], conv_output_size(s[2], p.kernel_h, p.stride_h, p.pad_h),
                   conv_output_size(s[3], p.kernel_w, p.stride_w, p.pad_w)};
    Tensor y(cpu(), ys), dx(cpu(), s);
    Guarded gy = guarded(ys), gdx = guarded(s);
    const Tensor dy = random(ys, 22), gdy = to_gpu(dy);
    cpu().max_pool2d_forward(x, y, p);
    gpu().max_pool2d_forward(gx, gy.view, p);
    EXPECT_TRUE(close(gy.view, y, kExact, "max_pool2d_forward " + what));
    cpu().max_pool2d_backward(x, y, dy, dx, p);
    gpu().max_pool2d_backward(gx, gy.view, gdy, gdx.view, p);
    EXPECT_TRUE(close(gdx.view, dx, kWindowSum, "max_pool2d_backward " + what));
    cpu().avg_pool2d_forward(x, y, p);
    gpu().avg_pool2d_forward(gx, gy.view, p);
    EXPECT_TRUE(close(gy.view, y, kWindowSum, "avg_pool2d_forward " + what));
    cpu().avg_pool2d_backward(dy, dx, p);
    gpu().avg_pool2d_backward(gdy, gdx.view, p);
    EXPECT_TRUE(close(gdx.view, dx, kWindowSum, "avg_pool2d_backward " + what));
    EXPECT_TRUE(guards_intact(gy, "pool y") && guards_intact(gdx, "pool dx"));
  }
  Tensor y(cpu(), {s[0], s[1]}), dx(cpu(), s);
  Guarded gy = guarded({s[0], s[1]}), gdx = guarded(s);
  cpu().global_avg_pool_forward(x, y);
  gpu().global_avg_pool_forward(gx, gy.view);
  EXPECT_TRUE(close(gy.view, y, kWindowSum, "global_avg_pool_forward"));
  const Tensor dy = random({s[0], s[1]}, 23);
  cpu().global_avg_pool_backward(dy, dx);
  gpu().global_avg_pool_backward(to_gpu(dy), gdx.view);
  EXPECT_TRUE(close(gdx.view, dx, kElementwise, "global_avg_pool_backward"));
  EXPECT_TRUE(guards_intact(gy, "gap y") && guards_intact(gdx, "gap dx"));
}

TEST_F(CudaParity, LinearForwardAndBackwardMatchTheCpu) {
  for (auto [n, k, m] : {std::tuple{5, 7, 3}, std::tuple{64, 512, 10}, std::tuple{33, 100, 257}}) {
    const std::string what = std::to_string(n) + "x" + std::to_string(k) + "->" + std::to_string(m);
    const Tensor x = random({n, k}, 31), w = random({m, k}, 32), b = random({m}, 33),
                 dy = random({n, m}, 34);
    Tensor y(cpu(), {n, m}), dx(cpu(), {n, k}), dw(cpu(), {m, k}), db(cpu(), {m});
    cpu().linear_forward(x, w, b, y);
    cpu().linear_backward(x, w, dy, dx, dw, db);
    const Tensor gx = to_gpu(x), gw = to_gpu(w);
    Guarded gy = guarded({n, m}), gdx = guarded({n, k}), gdw = guarded({m, k}), gdb = guarded({m});
    gpu().linear_forward(gx, gw, to_gpu(b), gy.view);
    gpu().linear_backward(gx, gw, to_gpu(dy), gdx.view, gdw.view, gdb.view);
    EXPECT_TRUE(close(gy.view, y, kGemm, "linear y " + what));
    EXPECT_TRUE(close(gdx.view, dx, kGemm, "linear dx " + what));
    EXPECT_TRUE(close(gdw.view, dw, kGemm, "linear dw " + what));
    EXPECT_TRUE(close(gdb.view, db, kGemm, "linear db " + what));
    EXPECT_TRUE(guards_intact(gy, "y") && guards_intact(gdx, "dx") && guards_intact(gdw, "dw") &&
                guards_intact(gdb, "db"));
  }
}

TEST_F(CudaParity, SoftmaxCrossEntropyLossAccuracyAndGradientMatchTheCpu) {
  for (auto [n, c] : {std::pair{7, 10}, std::pair{64, 1000}, std::pair{300, 3}}) {
    const std::string what = std::to_string(n) + "x" + std::to_string(c);
    const Tensor logits = random({n, c}, 41, -4.0f, 4.0f), lab = labels(n, c, 42);
    Tensor probs(cpu(), {n, c}), loss(cpu(), {1}), correct(cpu(), {1}), dl(cpu(), {n, c});
    cpu().softmax_cross_entropy_forward(logits, lab, probs, loss, correct);
    cpu().softmax_cross_entropy_backward(probs, lab, dl);
    const Tensor glab = to_gpu(lab);
    Guarded gp = guarded({n, c}), gloss = guarded({1}), gcorrect = guarded({1}),
            gdl = guarded({n, c});
    gpu().softmax_cross_entropy_forward(to_gpu(logits), glab, gp.view, gloss.view, gcorrect.view);
    gpu().softmax_cross_entropy_backward(gp.view, glab, gdl.view);
    EXPECT_TRUE(close(gp.view, probs, kSoftmax, "probs " + what));
    EXPECT_TRUE(close(gloss.view, loss, kSoftmax, "loss " + what));
    EXPECT_TRUE(close(gcorrect.view, correct, kExact, "correct " + what));
    EXPECT_TRUE(close(gdl.view, dl, kSoftmax, "dlogits " + what));
    EXPECT_TRUE(guards_intact(gp, "probs") && guards_intact(gloss, "loss") &&
                guards_intact(gcorrect, "correct") && guards_intact(gdl, "dlogits"));
  }
}

TEST_F(CudaParity, SgdAndAdamUpdatesMatchTheCpu) {
  const Shape s{10007};
  const Tensor w0 = random(s, 51), g = random(s, 52), v0 = random(s, 53, 0.0f, 0.1f);
  for (bool nesterov : {false, true}) {
    Tensor w = random(s, 51), v = random(s, 53, 0.0f, 0.1f);
    Tensor gw = to_gpu(w0), gv = to_gpu(v0);
    const SgdParams p{0.05f, 0.9f, 1e-4f, nesterov};
    for (int step = 0; step < 3; ++step) {
      cpu().sgd_update(w, g, v, p);
      gpu().sgd_update(gw, to_gpu(g), gv, p);
    }
    EXPECT_TRUE(close(gw, w, kElementwise, nesterov ? "sgd nesterov w" : "sgd w"));
    EXPECT_TRUE(close(gv, v, kElementwise, "sgd velocity"));
  }
  for (bool decoupled : {false, true}) {
    Tensor w = random(s, 51), m(cpu(), s), v(cpu(), s);
    cpu().fill(m, 0.0f);
    cpu().fill(v, 0.0f);
    Tensor gw = to_gpu(w0), gm = to_gpu(m), gv = to_gpu(v);
    AdamParams p;
    p.weight_decay = 0.01f;
    p.decoupled_weight_decay = decoupled;
    for (p.step = 1; p.step <= 3; ++p.step) {
      cpu().adam_update(w, g, m, v, p);
      gpu().adam_update(gw, to_gpu(g), gm, gv, p);
    }
    EXPECT_TRUE(close(gw, w, kAdam, decoupled ? "adamw w" : "adam w"));
    EXPECT_TRUE(close(gm, m, kAdam, "adam m"));
    EXPECT_TRUE(close(gv, v, kAdam, "adam v"));
  }
}

// The optimizers' per-step values in device memory (write_values, then an
// update that reads them when it runs) equal the values passed by field.
TEST_F(CudaParity, UpdatesReadTheirStepValuesFromDeviceMemory) {
  const Shape s{4099};
  const Tensor w0 = random(s, 61), g = random(s, 62);
  Tensor w = random(s, 61), m(cpu(), s), v(cpu(), s);
  cpu().fill(m, 0.0f);
  cpu().fill(v, 0.0f);
  Tensor gw = to_gpu(w0), gm = to_gpu(m), gv = to_gpu(v), gg = to_gpu(g);
  Tensor scalars(gpu(), {4});
  AdamParams field;
  field.lr = 0.01f;
  AdamParams device = field;
  device.lr = -1.0f;  // ignored: the tensor holds the rate
  device.scalars = &scalars;
  for (field.step = 1; field.step <= 3; ++field.step) {
    const auto correction = [&](float beta) {
      return static_cast<float>(1.0 - std::pow(static_cast<double>(beta), static_cast<double>(field.step)));
    };
    const float values[] = {field.lr, correction(field.beta1), correction(field.beta2)};
    gpu().write_values(scalars, values);
    cpu().adam_update(w, g, m, v, field);
    gpu().adam_update(gw, gg, gm, gv, device);
  }
  EXPECT_TRUE(close(gw, w, kAdam, "adam w, step values on the device"));
  const std::vector<float> back = scalars.to_vector();
  EXPECT_EQ(back[0], 0.01f);
  Tensor ints(gpu(), {4}, DType::kInt32);
  SgdParams bad;
  bad.scalars = &ints;
  EXPECT_THROW(gpu().sgd_update(gw, gg, gv, bad), InvalidArgument);
}

TEST_F(CudaParity, WrongShapesAreInvalidArgumentNamingTheTensor) {
  Tensor x(gpu(), {2, 3, 8, 8}), w(gpu(), {4, 3, 3, 3}), y(gpu(), {2, 4, 7, 7});
  try {
    gpu().conv2d_forward(x, w, Tensor(), y, {});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos) << e.what();
  }
  const Tensor host = random({2, 3, 8, 8}, 1);
  Tensor out(gpu(), {2, 3, 8, 8});
  EXPECT_THROW(gpu().relu_forward(host, out), InvalidArgument);
}

}  // namespace
}  // namespace stoke::testing
