// A network's eval-mode forward as one backend program (stoke/program.hpp):
// batch norm folded into the preceding convolution's weights and bias, the
// bias, residual add and ReLU fused into the convolution (the
// conv2d_fused_forward op), the layout between layers the backend's choice.
// What it recognizes:
//   Conv2d [BatchNorm2d] [Relu]            -> one fused convolution
//   Residual (conv-bn[-relu]... body, shortcut conv-bn or identity)
//                                          -> a block: its convolutions, the
//                                             last adding the shortcut, then the relu
//   Sequential                             -> its layers, in order
//   Pool2d, GlobalAvgPool, Linear, Relu, Flatten, Dropout -> their ops
//   Unet                                   -> one program per encoder stage and
//                                             per decoder block, the upsampling,
//                                             skip concatenation and head between
//                                             them (fp32 and bf16; int8 runs the
//                                             layer's own forward)
// Any other layer runs its own forward(x, false) (and the program is then
// not safe to run on two threads at once).
//
// Used by Model::forward(x, false) and through it by the Predictor, the
// evaluation and validation inside fit(); the bench and tests use it directly.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stoke/nn/layers.hpp"
#include "stoke/program.hpp"

namespace stoke::nn {

class STOKE_INTERNAL FusedInference {
 public:
  // kAuto: the backend's layouts; kPlain: NCHW between layers (tests compare).
  enum class Layout { kAuto, kPlain };
  // Folds the network's current weights and statistics. The network must
  // outlive this object; call refold() after its parameters change.
  // `precision`: resolved (stoke::resolve_precision), one the backend runs;
  // bf16 rounds the folded fp32 weights once.
  // int8 needs `input_ranges`: one calibrated range per fused convolution,
  // in the program's order (record_conv_input_ranges); InvalidArgument for
  // another count.
  explicit FusedInference(Sequential& net, Layout layout = Layout::kAuto,
                          Precision precision = Precision::kFp32,
                          const std::vector<ActivationRange>& input_ranges = {});
  // The top-level layers [first, end) of `net` only: a part of the network
  // (feature extraction runs the stem..layer2 and layer3 of a backbone as
  // two such programs). InvalidArgument for an empty or out-of-range span.
  FusedInference(Sequential& net, std::size_t first, std::size_t end, Layout layout = Layout::kAuto,
                 Precision precision = Precision::kFp32,
                 const std::vector<ActivationRange>& input_ranges = {});
  ~FusedInference();
  FusedInference(const FusedInference&) = delete;
  FusedInference& operator=(const FusedInference&) = delete;

  void refold();
  // x (N, C, H, W) -> the network's output; valid until the next forward.
  const Tensor& forward(const Tensor& x) { return program_->forward(x); }
  // Convolutions fused (for tests and the bench): each is one output pass.
  int fused_convolutions() const noexcept;
  // Whether activations stay in the backend's blocked layout between convolutions.
  bool blocked() const noexcept { return program_->blocked(); }
  std::string implementations() const { return program_->implementations(); }
  // int8 calibration (InferenceProgram::record_conv_input_ranges).
  bool record_conv_input_ranges(std::vector<ActivationRange>* ranges) {
    return program_->record_conv_input_ranges(ranges);
  }
  Precision precision() const noexcept { return precision_; }
  // Whether programs of this network may run on two threads at once.
  bool concurrent() const noexcept { return program_->concurrent(); }
  // Another program over the same folded weights, for `backend` (a worker
  // of the network's backend: Backend::make_worker). Not refolded by refold().
  std::unique_ptr<InferenceProgram> compile(Backend& backend) const;
  // The bench's profile (InferenceProgram::record_step_times).
  void record_step_times(bool on) noexcept { program_->record_step_times(on); }
  const std::vector<std::pair<std::string, double>>& step_times() const noexcept {
    return program_->step_times();
  }

  // A network inside a step that runs as programs of its own (a U-Net).
  struct Nested;

  // A folded convolution's sources: where refold() reads it from.
  struct Source {
    const Conv2d* conv = nullptr;
    const BatchNorm2d* bn = nullptr;
    FusedConv* target = nullptr;  // in steps_
  };

 private:
  Backend* backend_;
  ProgramLayout layout_;
  Precision precision_;
  std::vector<InferenceStep> steps_;
  std::vector<Source> sources_;
  std::vector<std::unique_ptr<Nested>> nested_;  // run by kLayer steps of steps_
  std::unique_ptr<InferenceProgram> program_;
};

}  // namespace stoke::nn
