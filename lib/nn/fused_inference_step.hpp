// The steps FusedInference runs (fused_inference.hpp): shared by the plain
// path (fused_inference.cpp) and the blocked-layout path
// (fused_inference_blocked.cpp).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/conv2d_blocked.hpp"
#include "nn/fused_inference.hpp"

namespace stoke::nn {

inline void ensure_shape(Backend& be, Tensor& t, const Shape& shape) {
  if (!t.defined() || t.shape() != shape) t = Tensor(be, shape);
}

// One convolution with what follows it folded in or fused.
struct FoldedConv {
  const Conv2d* conv = nullptr;
  const BatchNorm2d* bn = nullptr;  // folded into w, b
  bool relu = false;
  Tensor w, b;  // folded weights and bias
  // Plain path: the output (a view of one of the shared slots) and the
  // plain-ops path's intermediate.
  Tensor y, scratch;
  cpu::blocked::Conv blocked;  // blocked path: w and b in oneDNN's layouts

  void fold(Backend& be, bool blocked_layout);
  // y must be set to a view of the output's shape first.
  const Tensor& run(Backend& be, const Tensor& x, const Tensor* residual);
};

// Convolution outputs live in kSlots shared buffers: a step reads its input
// from one slot and writes to others (a block holds at most its input, its
// shortcut, the previous and the current convolution's output at once), so
// memory is four activations, not one per convolution. Other layers keep
// their own outputs.
constexpr int kSlots = 4;
using Slots = std::array<Tensor, kSlots>;

// Blocked path: the activation between steps, either plain (the network's
// input or a layer's output) or blocked in a slot.
struct Activation {
  const Tensor* plain = nullptr;
  int slot = -1;  // >= 0: blocked, in slots[slot]
  Shape shape;
};

// Runs f(), adding its wall time under `name` to `out` when `on`.
template <class F>
void timed(bool on, std::vector<std::pair<std::string, double>>& out, const std::string& name,
           F&& f) {
  if (!on) return f();
  const auto t0 = std::chrono::steady_clock::now();
  f();
  out.emplace_back(
      name,
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

struct FusedInference::Step {
  enum class Kind { kConvs, kBlock, kLayer } kind = Kind::kLayer;
  // kConvs: one folded convolution; kBlock: the body's chain, the last one
  // taking the residual (shortcut.conv null: identity) and the block's relu.
  std::vector<FoldedConv> chain;
  FoldedConv shortcut;
  Layer* layer = nullptr;  // kLayer
  Tensor plain_input;      // blocked path, kLayer: its input made plain

  const std::string& name() const { return layer ? layer->name() : chain.front().conv->name(); }
  Shape output_shape(const Shape& in) const;
  // Largest convolution output of this step for input `in`, in elements
  // (blocked: in the blocked layout, the input counted too).
  std::int64_t largest_output(const Shape& in, bool blocked) const;
  void fold(Backend& be, bool blocked);
  // Plain path. `slot`: the slot x lives in (-1: not a slot); set to the output's.
  const Tensor& run(Backend& be, const Tensor& x, Slots& slots, int& slot);
  // Blocked path (fused_inference_blocked.cpp): `act` in, the step's output out.
  void run_blocked(Backend& be, Activation& act, Slots& slots);
};

}  // namespace stoke::nn
