// Per-image latency of `stoke predict`'s path at batch 1: read + decode +
// preprocess (the model file's own) + forward, through Predictor::Session,
// and the two parts on their own; then the images/s of `concurrent` threads
// calling predict_file on the one Predictor at once against one thread's
// (rounds interleaved); with --batch N also the forward of N images at once.
// The precision is STOKE_PRECISION's (docs/precision.md); the backend the
// registry's default (STOKE_GPU_DEVICE: a GPU where one is). Prints one JSON
// object.
//
//   stoke_bench_predict --model MODEL --image FILE [--iterations N] [--warmup N]
//                       [--concurrent N] [--batch N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

struct Stats {
  double median_ms = 0, p90_ms = 0;
};

Stats time_it(int warmup, int iterations, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)]};
}

// Images per second of `callers` threads each running `per_caller` predictions.
double images_per_second(stoke::Predictor& predictor, const std::string& image, int callers,
                         int per_caller) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c) {
    threads.emplace_back([&] {
      for (int i = 0; i < per_caller; ++i) predictor.predict_file(image);
    });
  }
  for (auto& t : threads) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return callers * per_caller / s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, image;
  int iterations = 50, warmup = 5, concurrent = 2, batch = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model"))
      model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--image"))
      image = argv[i + 1];
    else if (!std::strcmp(argv[i], "--iterations"))
      iterations = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup"))
      warmup = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--concurrent"))
      concurrent = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--batch"))
      batch = std::atoi(argv[i + 1]);
  }
  if (model.empty() || image.empty() || iterations < 1) {
    std::fprintf(stderr, "usage: %s --model MODEL --image FILE [--iterations N] [--warmup N]\n",
                 argv[0]);
    return 2;
  }
  try {
    const auto runtime = stoke::init();
    stoke::PredictorOptions options;
    options.context = runtime.context;  // STOKE_PRECISION
    stoke::Predictor predictor(model, options);
    auto session = predictor.session();
    std::vector<float> input(predictor.sample_size());
    const Stats total = time_it(warmup, iterations, [&] { session.predict_file(image); });
    const Stats pre = time_it(warmup, iterations, [&] { session.preprocess_file(image, input); });
    const Stats fwd = time_it(warmup, iterations, [&] { predictor.logits(input, 1); });
    Stats fwd_batch;
    if (batch > 1) {
      std::vector<float> inputs;
      for (int b = 0; b < batch; ++b) inputs.insert(inputs.end(), input.begin(), input.end());
      fwd_batch = time_it(std::max(1, warmup / 2), std::max(3, iterations / batch),
                          [&] { predictor.logits(inputs, static_cast<std::size_t>(batch)); });
    }
    std::vector<double> one, many;
    images_per_second(predictor, image, std::max(1, concurrent), 2);  // the workers made
    for (int round = 0; round < 3; ++round) {
      one.push_back(images_per_second(predictor, image, 1, iterations));
      many.push_back(images_per_second(predictor, image, std::max(1, concurrent),
                                       std::max(1, iterations / std::max(1, concurrent))));
    }
    std::sort(one.begin(), one.end());
    std::sort(many.begin(), many.end());
    const auto& p = predictor.info().preprocess;
    std::printf(
        "{\"impl\": \"stoke\", \"backend\": \"%s\", \"precision\": \"%s\", \"threads\": %d, "
        "\"input\": "
        "\"%dx%dx%d\", \"image\": \"%s\", "
        "\"total_ms\": %.3f, \"total_p90_ms\": %.3f, \"decode_preprocess_ms\": %.3f, "
        "\"forward_ms\": %.3f, \"concurrent\": %d, \"one_caller_images_per_s\": %.2f, "
        "\"concurrent_images_per_s\": %.2f, \"batch\": %d, \"forward_batch_ms\": %.3f}\n",
        stoke::default_backend().name().c_str(), stoke::to_string(predictor.self_check().precision),
        runtime.cpu_threads, p.channels, p.height, p.width, image.c_str(), total.median_ms,
        total.p90_ms, pre.median_ms, fwd.median_ms, concurrent, one[1], many[1], batch,
        fwd_batch.median_ms);
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke_bench_predict: %s\n", e.what());
    return 1;
  }
}
