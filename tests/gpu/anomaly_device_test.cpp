// Anomaly models on the GPU (label gpu; skips with the reason without a
// device). A PatchCore and a PaDiM model fitted on the CPU and loaded onto the
// CUDA backend (strict FP32) score the same files as on the CPU: the backbone
// through cuDNN, PatchCore's nearest-neighbour search as the backend's GEMM
// (cuBLAS). And PatchCore fitted on the GPU (every patch kept) has the CPU's
// memory bank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gpu/gpu_fixture.hpp"
#include "stoke/cuda.hpp"
#include "unit/anomaly_fixture.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;

// max |a - b| / max(1, max |b|).
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0.0, scale = 1.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b[i])));
  }
  return diff / scale;
}

class GpuAnomaly : public SyntheticParts {
 protected:
  void SetUp() override {
    const std::string why = gpu_unavailable_reason(query_system());
    if (!why.empty()) GTEST_SKIP() << why;
    SyntheticParts::SetUp();
    CudaBackendOptions strict;
    strict.strict_fp32 = true;
    gpu_ = create_cuda_backend(0, Settings{}, strict);
  }

  // Fitted and calibrated on the CPU, saved, loaded on the GPU: every
  // defect's score and map as on the CPU.
  void expect_gpu_scores_as_cpu(anomaly::AnomalyMethod method) {
    anomaly::PatchCoreOptions o;
    o.method = method;
    o.coreset_ratio = 0.5;
    anomaly::PatchCore core(anomaly_backbone(2), anomaly_preprocess(), o);
    core.fit({good_[0], good_[1], good_[2], good_[3]});
    core.calibrate({good_[4], good_[5]});
    const fs::path path = dir_ / "model.stoke";
    core.save(path);
    anomaly::PatchCore on_gpu = anomaly::PatchCore::load(path, *gpu_);
    for (std::size_t i = 0; i < 4; ++i) {
      const anomaly::AnomalyResult a = core.score_file(defect_[i]);
      const anomaly::AnomalyResult b = on_gpu.score_file(defect_[i]);
      EXPECT_LE(relative_difference({b.score}, {a.score}), 1e-4)
          << defect_[i] << ": " << b.score << " on the GPU, " << a.score;
      EXPECT_LE(relative_difference(b.map, a.map), 1e-4) << defect_[i];
      EXPECT_EQ(b.anomalous, a.anomalous) << defect_[i];
    }
  }

  std::unique_ptr<GpuBackend> gpu_;
};

TEST_F(GpuAnomaly, PatchCoreScoresOnTheGpuAsOnTheCpu) {
  expect_gpu_scores_as_cpu(anomaly::AnomalyMethod::kPatchCore);
}

TEST_F(GpuAnomaly, PadimScoresOnTheGpuAsOnTheCpu) {
  expect_gpu_scores_as_cpu(anomaly::AnomalyMethod::kPadim);
}

TEST_F(GpuAnomaly, PatchCoreFittedOnTheGpuHasTheCpusBank) {
  anomaly::PatchCoreOptions o;
  o.coreset_ratio = 1.0;  // every patch: no selection order to differ in
  const std::vector<fs::path> train{good_[0], good_[1], good_[2]};
  anomaly::PatchCore on_cpu(anomaly_backbone(3), anomaly_preprocess(), o);
  on_cpu.fit(train);
  auto backbone = anomaly_backbone(3);
  auto gpu_backbone = nn::build_model(*gpu_, backbone->spec(), 3);
  gpu_backbone->parameters().copy_from_host(backbone->parameters().to_vector().data());
  anomaly::PatchCore on_gpu(std::move(gpu_backbone), anomaly_preprocess(), o);
  on_gpu.fit(train);
  ASSERT_EQ(on_gpu.bank().size(), on_cpu.bank().size());
  EXPECT_LE(relative_difference(on_gpu.bank(), on_cpu.bank()), 1e-4);
}

}  // namespace
}  // namespace stoke::testing
