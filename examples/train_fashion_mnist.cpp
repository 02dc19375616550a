// Trains the ResNet-style net (widths 32/64/128, two basic blocks per stage)
// on Fashion-MNIST with the CPU backend, reports test accuracy and time per
// epoch, saves a checkpoint and classifies a few test images from it.
//
//   train_fashion_mnist [--data DIR] [--epochs 5] [--batch 64] [--lr 0.05]
//                       [--train-limit N] [--threads T] [--checkpoint PATH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/nn.hpp"
#include "stoke/threads.hpp"

namespace {

constexpr float kMean = 0.2860f, kStd = 0.3530f;  // Fashion-MNIST training set

struct Options {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 5, batch = 64, train_limit = 0, threads = 0;
  float lr = 0.05f;
  std::string checkpoint = "fashion_mnist_resnet.ckpt";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--data")
      o.data = v;
    else if (k == "--epochs")
      o.epochs = std::stoi(v);
    else if (k == "--batch")
      o.batch = std::stoi(v);
    else if (k == "--lr")
      o.lr = std::stof(v);
    else if (k == "--train-limit")
      o.train_limit = std::stoi(v);
    else if (k == "--threads")
      o.threads = std::stoi(v);
    else if (k == "--checkpoint")
      o.checkpoint = v;
    else
      throw stoke::InvalidArgument("unknown option " + k);
  }
  return o;
}

// Normalizes a batch of 28x28 images (random horizontal flips when augmenting).
void fill_batch(const stoke::Dataset& data, const int* idx, int n, bool augment, std::mt19937& rng,
                std::vector<float>& x, std::vector<std::int32_t>& y) {
  const auto first = data.pixels(0);
  const int rows = first.height, cols = first.width, hw = rows * cols;
  x.resize(static_cast<std::size_t>(n) * hw);
  y.resize(static_cast<std::size_t>(n));
  for (int b = 0; b < n; ++b) {
    const auto image = data.pixels(static_cast<std::size_t>(idx[b]));
    float* dst = x.data() + static_cast<std::size_t>(b) * hw;
    const bool flip = augment && (rng() & 1u);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const int sc = flip ? cols - 1 - c : c;
        dst[r * cols + c] = (image.row(r)[sc] / 255.0f - kMean) / kStd;
      }
    y[static_cast<std::size_t>(b)] = data.label(static_cast<std::size_t>(idx[b]));
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) stoke::set_thread_count(o.threads);
  // The data module's IDX reader (gzip or plain).
  const auto train = stoke::Dataset::from_idx(o.data + "/train-images-idx3-ubyte.gz",
                                              o.data + "/train-labels-idx1-ubyte.gz");
  const auto test = stoke::Dataset::from_idx(o.data + "/t10k-images-idx3-ubyte.gz",
                                             o.data + "/t10k-labels-idx1-ubyte.gz");
  const int train_count = static_cast<int>(train.size());
  const int train_n = o.train_limit > 0 ? std::min(o.train_limit, train_count) : train_count;

  stoke::Backend& be = stoke::cpu_backend();
  stoke::nn::ModelSpec
      spec;  // 1x28x28, stem 32, widths 32/64/128, strides 1/2/2, 2 blocks per stage
  auto model = stoke::nn::build_model(be, spec, 42);
  stoke::nn::Sgd sgd(*model, {0.9f, 5e-4f, true});
  stoke::nn::TrainStep step(*model, sgd);
  const int steps_per_epoch = train_n / o.batch;
  stoke::nn::LrSchedule sched;
  sched.kind = stoke::nn::ScheduleKind::kCosine;
  sched.base_lr = o.lr;
  sched.warmup_steps = std::min(200, steps_per_epoch);
  sched.total_steps = static_cast<std::int64_t>(steps_per_epoch) * o.epochs;
  std::printf("backend %s, %d threads, %lld parameters, %d train images, batch %d, %d epochs\n",
              be.name().c_str(), stoke::thread_count(),
              static_cast<long long>(model->parameter_count()), train_n, o.batch, o.epochs);
  const auto plan = model->memory_plan(o.batch, sgd.slots());
  std::printf("memory plan at batch %d: %.1f MiB (activations %.1f MiB)\n", o.batch,
              plan.total() / 1048576.0, plan.activations / 1048576.0);

  std::mt19937 rng(7);
  std::vector<int> order(static_cast<std::size_t>(train_n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<float> xh;
  std::vector<std::int32_t> yh;
  stoke::Tensor x(be, model->input_shape(o.batch)), y(be, {o.batch}, stoke::DType::kInt32);
  std::int64_t global_step = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0, acc_sum = 0;
    for (int s = 0; s < steps_per_epoch; ++s) {
      fill_batch(train, order.data() + static_cast<std::size_t>(s) * o.batch, o.batch, true, rng,
                 xh, yh);
      x.copy_from_host(xh.data());
      y.copy_from_host(yh.data());
      step.run(x, y, sched.lr(global_step++));
      const auto st = step.stats();
      loss_sum += st.loss;
      acc_sum += st.accuracy;
      if ((s + 1) % 100 == 0) {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("  epoch %d step %d/%d loss %.4f acc %.4f (%.1f ms/step)\n", epoch, s + 1,
                    steps_per_epoch, loss_sum / (s + 1), acc_sum / (s + 1),
                    1000.0 * secs / (s + 1));
        std::fflush(stdout);
      }
    }
    const double train_secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Test accuracy in inference mode, batch 500.
    const int eval_batch = 500;
    stoke::Tensor ex(be, model->input_shape(eval_batch)),
        ey(be, {eval_batch}, stoke::DType::kInt32);
    std::vector<int> idx(static_cast<std::size_t>(eval_batch));
    double correct = 0;
    for (int b = 0; b + eval_batch <= static_cast<int>(test.size()); b += eval_batch) {
      std::iota(idx.begin(), idx.end(), b);
      fill_batch(test, idx.data(), eval_batch, false, rng, xh, yh);
      ex.copy_from_host(xh.data());
      ey.copy_from_host(yh.data());
      correct += stoke::nn::evaluate(*model, ex, ey).accuracy * eval_batch;
    }
    std::printf("epoch %d: train loss %.4f acc %.4f, test acc %.4f, %.1f s train (%.1f images/s)\n",
                epoch, loss_sum / steps_per_epoch, acc_sum / steps_per_epoch,
                correct / static_cast<double>(test.size()), train_secs,
                steps_per_epoch * o.batch / train_secs);
    std::fflush(stdout);
  }

  std::map<std::string, std::string> meta = {{"dataset", "fashion-mnist"}};
  stoke::nn::Preprocessing pre;
  pre.mean = {kMean};
  pre.std = {kStd};
  pre.to_metadata(meta);
  stoke::nn::save_checkpoint(o.checkpoint, *model, &sgd, meta);
  stoke::nn::Classifier classifier(o.checkpoint, &be);
  std::vector<std::uint8_t> first8;
  for (std::size_t i = 0; i < 8; ++i) {
    const auto image = test.pixels(i);
    for (int r = 0; r < image.height; ++r)
      first8.insert(first8.end(), image.row(r), image.row(r) + image.width);
  }
  const auto preds = classifier.classify_batch(first8.data(), 8, 28, 28, 1);
  std::printf("checkpoint %s; first 8 test images: predicted", o.checkpoint.c_str());
  for (const auto& p : preds) std::printf(" %d", p.label);
  std::printf(", labels");
  for (int i = 0; i < 8; ++i) std::printf(" %d", test.label(static_cast<std::size_t>(i)));
  std::printf("\n");
  return 0;
} catch (const stoke::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
