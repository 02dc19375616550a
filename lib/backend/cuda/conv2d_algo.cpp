// Choosing cuDNN convolution algorithms: cuDNN's heuristics (cudnnGet*_v7,
// no device work) by default, or timing every candidate once per shape
// (cudnnFind*Ex, synchronizes) in benchmark mode. Either choice is cached per
// pass and shape key, so a step issues no choice work after the first.
#include <algorithm>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/conv2d.hpp"
#include "backend/cuda/conv_algo_text.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::cuda {
namespace {

const char* const* const kPassNames = kConvPassNames;

const char* algo_name(int pass, int algo) {
  static const char* const fwd[] = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  static const char* const bwd_data[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                         "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* const bwd_filter[] = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  if (algo < 0) return "?";
  if (pass == kConvForward && algo < 8) return fwd[algo];
  if (pass == kConvBackwardData && algo < 6) return bwd_data[algo];
  if (pass == kConvBackwardFilter && algo < 7) return bwd_filter[algo];
  return "?";
}

struct Candidate {
  int algo;
  cudnnStatus_t status;
  float time;
  std::size_t memory;
  cudnnMathType_t math;
  bool deterministic;
};

template <typename Perf>
std::vector<Candidate> to_candidates(const Perf* perf, int count) {
  std::vector<Candidate> out;
  for (int i = 0; i < count; ++i) {
    out.push_back({static_cast<int>(perf[i].algo), perf[i].status, perf[i].time, perf[i].memory,
                   perf[i].mathType, perf[i].determinism == CUDNN_DETERMINISTIC});
  }
  return out;
}

// Heuristic candidates, best first.
std::vector<Candidate> heuristics(cudnnHandle_t h, int pass, const ConvSetup& s) {
  int returned = 0;
  if (pass == kConvForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    STOKE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        h, s.x(), s.w(), s.conv(), s.y(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
    return to_candidates(perf, returned);
  }
  if (pass == kConvBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    STOKE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, s.w(), s.y(), s.conv(), s.x(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
    return to_candidates(perf, returned);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  STOKE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      h, s.x(), s.y(), s.conv(), s.w(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf));
  return to_candidates(perf, returned);
}

// Timed candidates, fastest first (cudnnFind*Ex runs each on the buffers).
std::vector<Candidate> benchmark(cudnnHandle_t h, int pass, const ConvSetup& s,
                                 const CudaBackend::ConvCall& c, void* ws, std::size_t ws_bytes) {
  int returned = 0;
  if (pass == kConvForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    STOKE_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        h, s.x(), c.in1, s.w(), c.in2, s.conv(), s.y(), c.out, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        &returned, perf, ws, ws_bytes));
    return to_candidates(perf, returned);
  }
  if (pass == kConvBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    STOKE_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, s.w(), c.in1, s.y(), c.in2, s.conv(), s.x(), c.out,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf, ws, ws_bytes));
    return to_candidates(perf, returned);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  STOKE_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
      h, s.x(), c.in1, s.y(), c.in2, s.conv(), s.w(), c.out,
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf, ws, ws_bytes));
  return to_candidates(perf, returned);
}

bool acceptable(const Candidate& c, bool strict, bool deterministic, std::size_t limit) {
  if (c.status != CUDNN_STATUS_SUCCESS || c.memory > limit) return false;
  if (deterministic && !c.deterministic) return false;
  // Strict FP32: no tensor-core math (the descriptor asked for FMA math;
  // cuDNN may report such results as FMA or DEFAULT math).
  return !strict || c.math == CUDNN_FMA_MATH || c.math == CUDNN_DEFAULT_MATH;
}

}  // namespace

std::size_t CudaBackend::conv_workspace_limit() const {
  if (options_.conv_workspace_limit > 0) return options_.conv_workspace_limit;
  return std::max<std::size_t>(512ull << 20, pool_->cap() / 8);
}

ConvAlgoChoice CudaBackend::choose_conv_algo(int pass, const ConvCall& call) const {
  const std::string& key = call.setup.pass_key(pass);
  {
    std::lock_guard lock(algo_mutex_);
    if (auto it = algos_.find(key); it != algos_.end()) return it->second;
  }
  const bool strict = options_.strict_fp32;
  const bool det = options_.deterministic;
  const std::size_t limit = conv_workspace_limit();
  cudnnHandle_t h = cudnn();
  std::vector<Candidate> candidates = heuristics(h, pass, call.setup);
  // Benchmarking needs the real buffers and synchronizes: never inside a
  // capture, never for a size query.
  const bool can_time = options_.conv_benchmark && !capturing_ && call.out;
  bool timed = false;
  if (can_time) {
    std::size_t need = 0;
    for (const auto& c : candidates)
      if (acceptable(c, strict, det, limit)) need = std::max(need, c.memory);
    try {
      // The workspace is the backend's scratch memory; growing it is not an
      // observable change of the backend, hence the const_cast. The timing
      // writes into it: held until cudnnFind returns.
      const auto lock = workspace_lock();
      void* ws = const_cast<CudaBackend*>(this)->workspace(need);
      auto measured = benchmark(h, pass, call.setup, call, ws, need);
      if (std::any_of(measured.begin(), measured.end(),
                      [&](const Candidate& c) { return acceptable(c, strict, det, need); })) {
        candidates = std::move(measured);
        timed = true;
      }
    } catch (const Error& e) {
      log_warn(std::string("cuDNN algorithm benchmark failed for ") + key +
               ", using heuristics: " + e.what());
    }
  }
  const auto it = std::find_if(candidates.begin(), candidates.end(), [&](const Candidate& c) {
    return acceptable(c, strict, det, limit);
  });
  if (it == candidates.end()) {
    throw Unsupported("cuDNN offers no " + std::string(kPassNames[pass]) +
                      " convolution algorithm for " + call.setup.key() + " within a workspace of " +
                      std::to_string(limit) + " bytes" + (strict ? " in strict FP32" : "") +
                      (det ? ", deterministic" : "") + " on cuda:" + std::to_string(device_));
  }
  ConvAlgoChoice choice;
  choice.pass = kPassNames[pass];
  choice.key = call.setup.key();
  choice.algorithm = it->algo;
  choice.algorithm_name = algo_name(pass, it->algo);
  choice.workspace_bytes = it->memory;
  choice.benchmarked = timed;
  // Strict runs with FMA math whatever cuDNN reported, so TF32 stays off.
  choice.math_type = static_cast<int>(strict ? CUDNN_FMA_MATH : it->math);
  // What cuDNN reported for the chosen candidate, not what strict implies:
  // a tensor-op candidate let through in strict mode shows here.
  choice.tensor_ops = it->math == CUDNN_TENSOR_OP_MATH ||
                      it->math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||
                      (!strict && it->math == CUDNN_DEFAULT_MATH);
  choice.time_ms = timed ? it->time : -1.0f;
  choice.deterministic = it->deterministic;
  // A size query (no buffers) in benchmark mode must not pin a heuristic choice.
  if (call.out || !options_.conv_benchmark) {
    std::lock_guard lock(algo_mutex_);
    if (algos_.emplace(key, choice).second) algo_order_.push_back(key);
  }
  return choice;
}

std::string CudaBackend::save_conv_algorithms() const {
  return format_conv_algos(conv_algorithms(), static_cast<int>(cudnnGetVersion()));
}

std::size_t CudaBackend::load_conv_algorithms(const std::string& text) {
  // Loaded choices obey this backend's options as its own choices would.
  ConvAlgoLimits limits;
  limits.deterministic = options_.deterministic;
  limits.workspace_limit = conv_workspace_limit();
  std::string why;
  const auto choices = conv_algos_to_load(text, static_cast<int>(cudnnGetVersion()), limits, &why);
  if (!why.empty()) log_warn("cuDNN algorithm choices not loaded on " + name() + ": " + why);
  std::size_t added = 0;
  std::lock_guard lock(algo_mutex_);
  for (const ConvAlgoChoice& c : choices) {
    const std::string key = c.pass + " " + c.key;
    if (algos_.emplace(key, c).second) {
      algo_order_.push_back(key);
      ++added;
    }
  }
  return added;
}

}  // namespace stoke::cuda
