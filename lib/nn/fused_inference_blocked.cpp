// FusedInference's blocked-layout path (fused_inference.hpp): activations
// stay in oneDNN's blocked layout (backend/cpu/conv2d_blocked.hpp) from the
// first convolution to the next layer that is neither a convolution nor a max
// pool (global average pool, linear, ...), which gets them back in NCHW. A basic block's last
// convolution adds the residual with oneDNN's sum post-op, in place on the residual's slot (the
// shortcut's output, or the block's input, which nothing reads afterwards).
#include <cstring>

#include "nn/fused_inference_step.hpp"

namespace stoke::nn {

namespace {

namespace blk = cpu::blocked;

float* slot_data(Slots& slots, int s) {
  return slots[static_cast<std::size_t>(s)].data<float>();
}

// The lowest slot not in `busy` (a bit set).
int free_slot(int busy) {
  int s = 0;
  while (busy & (1 << s)) ++s;
  return s;
}

// A plain activation made blocked in a free slot.
void make_blocked(Backend& be, Activation& act, Slots& slots) {
  if (act.slot >= 0) return;
  const int s = free_slot(0);
  blk::to_blocked(be, *act.plain, slot_data(slots, s));
  act = {nullptr, s, act.shape};
}

}  // namespace

void FusedInference::Step::run_blocked(Backend& be, Activation& act, Slots& slots) {
  if (kind == Kind::kLayer) {
    const auto* pool = dynamic_cast<const Pool2d*>(layer);
    if (act.slot >= 0 && pool && pool->kind() == PoolKind::kMax) {  // stays blocked
      const int out = free_slot(1 << act.slot);
      const Shape shape = layer->output_shape(act.shape);
      blk::max_pool(be, act.shape, slot_data(slots, act.slot), slot_data(slots, out),
                    pool->params());
      act = {nullptr, out, shape};
      return;
    }
    if (act.slot >= 0) {
      ensure_shape(be, plain_input, act.shape);
      blk::to_plain(be, slot_data(slots, act.slot), plain_input);
      act = {&plain_input, -1, act.shape};
    }
    const Tensor& y = layer->forward(*act.plain, false);
    act = {&y, -1, y.shape()};
    return;
  }
  // oneDNN's first-layer kernels read a plain input with few channels as it is.
  const bool read_plain =
      act.slot < 0 && kind == Kind::kConvs && act.shape[1] < blk::block_channels();
  if (!read_plain) make_blocked(be, act, slots);
  const int in = act.slot < 0 ? 0 : 1 << act.slot;
  const float* x = read_plain ? act.plain->data<float>() : slot_data(slots, act.slot);
  int residual = -1;  // kBlock: the slot the last convolution accumulates into
  if (kind == Kind::kBlock) {
    if (shortcut.conv) {
      residual = free_slot(in);
      shortcut.blocked.forward(be, act.shape, x, false, slot_data(slots, residual), false);
    } else if (chain.size() > 1) {
      residual = act.slot;  // the input is read by the first convolution only
    } else {                // one convolution reading its own residual: copy it
      residual = free_slot(in);
      std::memcpy(slot_data(slots, residual), x,
                  static_cast<std::size_t>(blk::blocked_floats(act.shape)) * sizeof(float));
    }
  }
  const int keep = in | (residual >= 0 ? 1 << residual : 0);
  Shape shape = act.shape;
  bool plain = read_plain;
  int prev = 0;  // the previous convolution's output slot (bit)
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const bool last = i + 1 == chain.size();
    const bool accumulate = last && residual >= 0;
    const int out = accumulate ? residual : free_slot(keep | prev);
    float* y = slot_data(slots, out);
    chain[i].blocked.forward(be, shape, x, plain, y, accumulate);
    shape = chain[i].conv->output_shape(shape);
    x = y, plain = false, prev = 1 << out;
    act = {nullptr, out, shape};
  }
}

const Tensor& FusedInference::forward_blocked(const Tensor& x) {
  Activation act{&x, -1, x.shape()};
  step_times_.clear();
  for (auto& step : steps_) {
    timed(record_, step_times_, step->name(), [&] { step->run_blocked(*backend_, act, slots_); });
  }
  if (act.slot < 0) return *act.plain;
  ensure_shape(*backend_, output_, act.shape);
  timed(record_, step_times_, "output to NCHW",
        [&] { blk::to_plain(*backend_, slot_data(slots_, act.slot), output_); });
  return output_;
}

std::string FusedInference::implementations() const {
  std::string out;
  auto add = [&](const FoldedConv& fc) {
    const std::string names = fc.blocked.implementations();
    if (!names.empty() && out.find(names) == std::string::npos)
      out += (out.empty() ? "" : "; ") + names;
  };
  for (const auto& step : steps_) {
    for (const auto& fc : step->chain) add(fc);
    if (step->shortcut.conv) add(step->shortcut);
  }
  return out;
}

}  // namespace stoke::nn
