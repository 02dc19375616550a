// CUDA graphs require the prefetcher's separate copy stream. With
// STOKE_GPU_STREAMS=off the uploads of the next batch run on the compute
// stream, so a capture there would bake them into the graph (or capture an
// event a later synchronize trips on). The trainer, and through it the
// autotuner's graph trial, runs such a configuration eagerly and says why.
#include <gtest/gtest.h>

#include "stoke/config.hpp"
#include "stoke/train.hpp"
#include "unit/fake_gpu_backend.hpp"
#include "unit/trainer_runs.hpp"

namespace stoke::testing {
namespace {

class GpuGraphStreams : public TrainerRuns {
 protected:
  Run fit_with(Backend& backend, const char* graphs, const char* streams) {
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    config.set("STOKE_GPU_GRAPH", graphs);
    config.set("STOKE_GPU_STREAMS", streams);
    options_.settings = config.settings();
    auto m = nn::build_model(backend, spec_, 7);
    Trainer trainer(*m, options_);
    Run run{trainer.fit(data_, val_, loader_), {}};
    run.parameters = m->parameters().to_vector();
    return run;
  }
};

TEST_F(GpuGraphStreams, GraphsWithStreamsOffRunEagerlyAndSayWhy) {
  FakeGpuBackend eager_gpu, gpu;
  const Run eager = fit_with(eager_gpu, "off", "off");
  const Run run = fit_with(gpu, "on", "off");
  EXPECT_EQ(gpu.captures(), 0) << "nothing may be captured while uploads share the compute stream";
  EXPECT_EQ(run.result.graph_steps, 0);
  EXPECT_NE(run.result.graph_note.find("STOKE_GPU_STREAMS is off"), std::string::npos)
      << run.result.graph_note;
  EXPECT_EQ(run.parameters, eager.parameters);
}

TEST_F(GpuGraphStreams, GraphsWithTheCopyStreamStillReplay) {
  FakeGpuBackend gpu;
  const Run run = fit_with(gpu, "on", "on");
  EXPECT_GT(gpu.captures(), 0);
  EXPECT_GT(run.result.graph_steps, 0) << run.result.graph_note;
}

}  // namespace
}  // namespace stoke::testing
