// Eval-mode forward of a network with batch norm folded into the preceding
// convolution's weights and bias, and bias + residual add + ReLU done in the
// convolution's output pass (on the CPU backend with oneDNN; elsewhere the
// same arithmetic through the plain backend ops). What it recognizes:
//   Conv2d [BatchNorm2d] [Relu]            -> one fused convolution
//   BasicBlock (conv-bn-relu-conv-bn, shortcut conv-bn or identity, add, relu)
//                                          -> two or three fused convolutions
//   Sequential                             -> its layers, in order
// Any other layer runs its own forward(x, false). Convolution outputs share
// four buffers, (re)allocated when the input shape grows and reused after.
// On the CPU backend with oneDNN the activations stay in oneDNN's blocked
// layout from the first convolution to the next other layer
// (backend/cpu/conv2d_blocked.hpp, fused_inference_blocked.cpp).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stoke/nn/layers.hpp"

namespace stoke::nn {

class STOKE_INTERNAL FusedInference {
 public:
  // kAuto: the blocked layout where available (CPU backend with oneDNN,
  // every convolution groups 1); kPlain: NCHW between layers (tests compare).
  enum class Layout { kAuto, kPlain };
  // Folds the network's current weights and statistics. The network must
  // outlive this object; call refold() after its parameters change.
  explicit FusedInference(Sequential& net, Layout layout = Layout::kAuto);
  ~FusedInference();
  FusedInference(const FusedInference&) = delete;
  FusedInference& operator=(const FusedInference&) = delete;

  void refold();
  // x (N, C, H, W) -> the network's output; valid until the next forward.
  const Tensor& forward(const Tensor& x);
  // Convolutions fused (for tests and the bench): each is one output pass.
  int fused_convolutions() const noexcept;
  // Whether activations stay in oneDNN's blocked layout between convolutions.
  bool blocked() const noexcept { return blocked_; }
  // oneDNN's names for the convolution kernels the blocked path runs (the bench).
  std::string implementations() const;
  // The bench's profile: once enabled, each forward records every step's wall
  // time (ms) under its first layer's name (a layer after blocked
  // convolutions includes the reorder back to NCHW).
  void record_step_times(bool on) noexcept { record_ = on; }
  const std::vector<std::pair<std::string, double>>& step_times() const noexcept {
    return step_times_;
  }

  struct Step;

 private:
  const Tensor& forward_blocked(const Tensor& x);

  Backend* backend_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::array<Tensor, 4> slots_;  // convolution outputs, see fused_inference.cpp
  Shape planned_for_;
  bool blocked_ = false;
  Tensor output_;  // blocked path: a network ending in a convolution, made plain
  bool record_ = false;
  std::vector<std::pair<std::string, double>> step_times_;
};

}  // namespace stoke::nn
