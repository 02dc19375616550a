// Fits of the tiny dataset's model on a given backend with CUDA graphs on or
// off, shared by the trainer's GPU-path tests (fake GPU here, CUDA in
// tests/gpu).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "stoke/train.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke::testing {

class TrainerRuns : public TinyDataset {
 protected:
  struct Run {
    FitResult result;
    std::vector<float> parameters;
  };
  // Trains a fresh model (seed 7) on `backend` with options_ and loader_,
  // prefetch depth 2 and STOKE_GPU_GRAPH set by `graphs`, validating on val_.
  Run fit(Backend& backend, Toggle graphs) {
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    config.set("STOKE_GPU_GRAPH", graphs == Toggle::kOn ? "on" : "off");
    options_.settings = config.settings();
    auto m = nn::build_model(backend, spec_, 7);
    Trainer trainer(*m, options_, callbacks_);
    fitting_ = m.get();
    Run run{trainer.fit(data_, val_, loader_), {}};
    fitting_ = nullptr;
    run.parameters = m->parameters().to_vector();
    return run;
  }
  static double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
    return worst;
  }
  static constexpr std::int64_t kSteps = kCount / 16;  // per epoch at batch 16
  const Dataset* val_ = nullptr;                       // validated after each epoch when set
  Callbacks callbacks_;                                // given to every fit
  nn::Model* fitting_ = nullptr;                       // the model fit() trains, while it runs
};

}  // namespace stoke::testing
