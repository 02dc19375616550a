// The CPU backend's inference program (stoke/program.hpp) with oneDNN:
// activations stay in oneDNN's blocked layout (conv2d_blocked.hpp) from the
// first convolution to the next step that is neither a convolution nor a max
// pool (global average pool, linear, ...), which gets them back in NCHW. A
// block's last convolution adds the residual with oneDNN's sum post-op, in
// place on the residual's slot (the shortcut's output, or the block's input,
// which nothing reads afterwards). Convolution outputs share four slots, as
// in the plain program (lib/backend/program.cpp).
//
// In bf16 (STOKE_PRECISION) the slots hold bf16 activations and the
// convolutions compute with bf16 weights (fp32 accumulation and bias, oneDNN's
// bf16 kernels); a network input is converted once, steps outside the
// convolutions and max pools (global pool, linear) get fp32 NCHW back.
//
// In int8 (conv2d_int8.hpp) each convolution computes in int8 from 8-bit
// codes of its input, quantized with the scale of its calibrated range. A
// step writes the next step's codes where the next step reads them in one
// quantization (a block whose first convolution and shortcut share it, or
// a lone convolution; a stem's codes pass a max pool as codes): writes_codes_.
// A block's identity shortcut adds its first convolution's input codes,
// dequantized in the last convolution's output pass (int8::Residual, as
// ONNX Runtime's QLinearAdd adds 8-bit inputs).
// Elsewhere a step's output is fp32 NHWC where a convolution step or a max
// pool reads it next (the int8 kernels' own layout), blocked fp32 before any
// other step; inside a step's chain the next layer's codes. Calibration
// (record_conv_input_ranges) runs the fp32 program and records the range of
// every convolution's input.
#include <algorithm>
#include <array>
#include <cstring>

#include "backend/cpu/conv2d_blocked.hpp"
#include "backend/cpu/conv2d_int8.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/program_steps.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {

namespace blk = blocked;
using Kind = InferenceStep::Kind;

constexpr int kSlots = 4;

using Layout = int8::Layout;

// The activation between steps: plain (the input or a step's output) or in a
// slot: blocked, or (int8 programs) NHWC fp32 or codes.
struct Flow {
  const Tensor* plain = nullptr;
  int slot = -1;  // >= 0: in slots[slot]
  Shape shape;
  Layout layout = Layout::kPlain;
};

// The lowest slot not in `busy` (a bit set).
int free_slot(int busy) {
  int s = 0;
  while (busy & (1 << s)) ++s;
  return s;
}

bool is_conv(const InferenceStep& step) {
  return step.kind == Kind::kConv || step.kind == Kind::kBlock;
}

class BlockedProgram final : public InferenceProgram {
 public:
  BlockedProgram(CpuBackend& backend, std::vector<InferenceStep> steps, blk::Elem elem,
                 bool int8 = false)
      : InferenceProgram(steps), be_(backend), steps_(std::move(steps)), elem_(elem), int8_(int8) {
    convs_.resize(steps_.size());
    int8_convs_.resize(steps_.size());
    plain_inputs_.resize(steps_.size());
    outputs_.resize(steps_.size());
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const std::size_t n = steps_[i].chain.size() + (steps_[i].shortcut ? 1 : 0);
      first_conv_.push_back(conv_count_);
      conv_count_ += n;
      if (int8_) {
        int8_convs_[i].resize(n);
      } else {
        convs_[i].resize(n);
      }
    }
    weights_changed();
  }

  void weights_changed() override {
    writes_codes_.assign(steps_.size(), false);
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const std::size_t n = int8_ ? int8_convs_[i].size() : convs_[i].size();
      for (std::size_t c = 0; c < n; ++c) {
        const FusedConv& fc = c < steps_[i].chain.size() ? steps_[i].chain[c] : *steps_[i].shortcut;
        const bool relu = fc.activation == Activation::kRelu;
        if (int8_) {
          int8_convs_[i][c].set_weights(fc.w, fc.bias, fc.params, relu, *fc.input_range);
          if (c > 0 && c < steps_[i].chain.size()) {  // the chain's previous one writes its codes
            int8_convs_[i][c - 1].set_output_codes(int8_convs_[i][c].input());
          }
        } else {
          convs_[i][c].set_weights(fc.w, fc.bias, fc.params, relu, elem_);
        }
      }
    }
    if (!int8_) return;
    // A block whose first convolution and shortcut quantize its input alike
    // quantizes it once (run_convs); an identity shortcut adds the first
    // convolution's codes.
    shared_codes_.assign(steps_.size(), false);
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      shared_codes_[i] =
          steps_[i].kind == Kind::kBlock &&
          (!steps_[i].shortcut || int8_convs_[i][0].input() == int8_convs_[i].back().input());
    }
    // A step whose next convolution step reads one quantization of its
    // output writes those codes; a lone convolution (a ResNet's stem) also
    // through a max pool (the maximum commutes with the quantizer).
    for (std::size_t i = 0; i + 1 < steps_.size(); ++i) {
      const bool lone = steps_[i].kind == Kind::kConv && steps_[i].chain.size() == 1;
      const std::size_t reader = lone && steps_[i + 1].kind == Kind::kMaxPool ? i + 2 : i + 1;
      if (!is_conv(steps_[i]) || reader >= steps_.size() || !is_conv(steps_[reader])) continue;
      if (steps_[reader].shortcut && !shared_codes_[reader]) continue;  // two quantizations
      int8_convs_[i][steps_[i].chain.size() - 1].set_output_codes(int8_convs_[reader][0].input());
      writes_codes_[i] = true;
    }
  }

  bool record_conv_input_ranges(std::vector<ActivationRange>* ranges) override {
    if (ranges && (int8_ || elem_ != blk::Elem::kF32)) return false;  // fp32's ranges only
    ranges_ = ranges;
    if (ranges_ && ranges_->size() != conv_count_) {
      ranges_->assign(conv_count_, ActivationRange{});
      seen_.assign(conv_count_, false);
    }
    if (ranges_ && seen_.size() != conv_count_) seen_.assign(conv_count_, true);
    return true;
  }

  bool blocked() const noexcept override { return true; }

  std::string implementations() const override {
    std::string out;
    const auto add = [&out](const std::string& names) {
      if (!names.empty() && out.find(names) == std::string::npos)
        out += (out.empty() ? "" : "; ") + names;
    };
    for (const auto& step : convs_)
      for (const auto& conv : step) add(conv.implementations());
    for (const auto& step : int8_convs_)
      for (const auto& conv : step) add(conv.implementations());
    return out;
  }

  const Tensor& forward(const Tensor& x) override {
    if (x.shape() != planned_for_) plan(x.shape());
    Flow flow{&x, -1, x.shape(), Layout::kPlain};
    clear_step_times();
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      timed(steps_[i].name, [&] { run(i, flow); });
    }
    if (flow.slot < 0) return *flow.plain;
    make_blocked_from_nhwc(flow);
    detail::ensure_shape(be_, output_, flow.shape);
    timed("output to NCHW", [&] { blk::to_plain(be_, slot(flow.slot), output_, elem_); });
    return output_;
  }

 private:
  void* slot(int s) { return slots_[static_cast<std::size_t>(s)].data<float>(); }

  // Convolution c of step i (the chain's, then the shortcut's), its input's
  // range recorded first when calibrating. `in` and `out`: int8 programs'
  // layouts (the others read blocked or plain and write blocked).
  void conv(std::size_t i, std::size_t c, const Shape& shape, const void* x, Layout in, void* y,
            Layout out, bool accumulate, const int8::Residual* residual = nullptr) {
    const bool plain = in == Layout::kPlain;
    if (ranges_) record(first_conv_[i] + c, shape, x, plain);
    if (int8_) return int8_convs_[i][c].forward(be_, shape, x, in, y, out, accumulate, residual);
    convs_[i][c].forward(be_, shape, x, plain, y, accumulate);
  }

  // The layout step i's output is written in: in an int8 program the next
  // step's codes (writes_codes_), else fp32 NHWC when a convolution step or
  // a max pool reads it next; else fp32 blocked.
  Layout output_layout(std::size_t i) const {
    if (!int8_ || i + 1 >= steps_.size()) return Layout::kBlocked;
    if (writes_codes_[i]) return Layout::kCodes;
    const InferenceStep& next = steps_[i + 1];
    return is_conv(next) || next.kind == Kind::kMaxPool ? Layout::kNhwc : Layout::kBlocked;
  }

  void record(std::size_t j, const Shape& shape, const void* x, bool plain) {
    const std::int64_t n = plain ? shape_numel(shape) : blk::blocked_floats(shape);
    const float* v = static_cast<const float*>(x);
    ActivationRange& r = (*ranges_)[j];
    float lo = seen_[j] ? r.min : v[0], hi = seen_[j] ? r.max : v[0];
    for (std::int64_t e = 0; e < n; ++e) lo = std::min(lo, v[e]), hi = std::max(hi, v[e]);
    r = {lo, hi};
    seen_[j] = true;
  }

  // Slots sized for the largest blocked activation a convolution or max
  // pool step reads or writes.
  void plan(const Shape& input) {
    std::int64_t most = 1;
    Shape s = input;
    for (const auto& step : steps_) {
      if (is_conv(step)) {
        most = std::max(most, blk::blocked_floats(s));  // a plain input made blocked
        if (step.shortcut) {
          most = std::max(most, blk::blocked_floats(conv2d_output_shape(s, step.shortcut->w.shape(),
                                                                        step.shortcut->params)));
        }
        Shape c = s;
        for (const auto& fc : step.chain) {
          c = conv2d_output_shape(c, fc.w.shape(), fc.params);
          most = std::max(most, blk::blocked_floats(c));
        }
      } else if (step.kind == Kind::kMaxPool) {
        most = std::max(most, blk::blocked_floats(step_output_shape(step, s)));
      }
      s = step_output_shape(step, s);
    }
    const auto floats = (most * static_cast<std::int64_t>(blk::elem_size(elem_)) + 3) / 4;
    for (Tensor& t : slots_) {
      if (!t.defined() || t.numel() < floats) t = Tensor(be_, {floats});
    }
    planned_for_ = input;
  }

  void make_blocked(Flow& flow) {
    if (flow.slot >= 0) return;
    const int s = free_slot(0);
    blk::to_blocked(be_, *flow.plain, slot(s), elem_);
    flow = {nullptr, s, flow.shape, Layout::kBlocked};
  }

  // An NHWC activation (an int8 block's output that kept its input's layout)
  // into the blocked layout, for the steps that read only that.
  void make_blocked_from_nhwc(Flow& flow) {
    if (flow.layout != Layout::kNhwc) return;
    const int s = free_slot(1 << flow.slot);
    int8::nhwc_to_blocked(be_, flow.shape, slot(flow.slot), slot(s));
    flow = {nullptr, s, flow.shape, Layout::kBlocked};
  }

  void run(std::size_t i, Flow& flow) {
    const InferenceStep& step = steps_[i];
    if (is_conv(step)) return run_convs(i, flow);
    if (step.kind == Kind::kMaxPool && flow.slot >= 0) {  // stays blocked (or NHWC, or codes)
      const int out = free_slot(1 << flow.slot);
      const Shape shape = step_output_shape(step, flow.shape);
      if (flow.layout == Layout::kCodes) {  // writes_codes_: the next step's codes
        blk::max_pool_codes(be_, flow.shape, slot(flow.slot), slot(out), step.pool,
                            int8_convs_[i + 1][0].input().is_unsigned);
        flow = {nullptr, out, shape, Layout::kCodes};
        return;
      }
      const bool nhwc = flow.layout == Layout::kNhwc;
      blk::max_pool(be_, flow.shape, slot(flow.slot), slot(out), step.pool, elem_, nhwc);
      flow = {nullptr, out, shape, nhwc ? Layout::kNhwc : Layout::kBlocked};
      return;
    }
    make_blocked_from_nhwc(flow);
    if (flow.slot >= 0) {
      detail::ensure_shape(be_, plain_inputs_[i], flow.shape);
      blk::to_plain(be_, slot(flow.slot), plain_inputs_[i], elem_);
      flow = {&plain_inputs_[i], -1, flow.shape, Layout::kPlain};
    }
    const Tensor& y = detail::run_plain_step(be_, step, *flow.plain, outputs_[i]);
    flow = {&y, -1, y.shape(), Layout::kPlain};
  }

  // The slot of what a block's last convolution adds (-1: not a block) and
  // its layout: the shortcut's output or the block's input. The last
  // convolution accumulates into it in the step's output layout, or reads
  // it as an int8::Residual (int8: codes, or a codes output).
  std::pair<int, Layout> residual_slot(std::size_t i, const Flow& flow, const void* x) {
    const InferenceStep& step = steps_[i];
    if (step.kind != Kind::kBlock) return {-1, Layout::kBlocked};
    const int in = flow.slot < 0 ? 0 : 1 << flow.slot;
    if (step.shortcut) {
      const int r = free_slot(in);
      const Layout layout = writes_codes_[i] ? Layout::kNhwc : output_layout(i);
      conv(i, step.chain.size(), flow.shape, x, flow.layout, slot(r), layout, false);
      return {r, layout};
    }
    if (flow.layout == Layout::kCodes) return {flow.slot, Layout::kCodes};  // read, not written
    // The input is read by the first convolution only.
    if (step.chain.size() > 1) return {flow.slot, flow.layout};
    const int r = free_slot(in);  // one convolution reading its own residual: copy it
    const std::size_t bytes =
        flow.layout == Layout::kNhwc
            ? static_cast<std::size_t>(shape_numel(flow.shape)) * 4
            : static_cast<std::size_t>(blk::blocked_floats(flow.shape)) * blk::elem_size(elem_);
    std::memcpy(slot(r), x, bytes);
    return {r, flow.layout};
  }

  void run_convs(std::size_t i, Flow& flow) {
    const InferenceStep& step = steps_[i];
    // oneDNN's first-layer kernels read a plain input with few channels as it is.
    const bool read_plain =
        flow.slot < 0 && step.kind == Kind::kConv && flow.shape[1] < blk::block_channels();
    if (!read_plain) make_blocked(flow);
    if (read_plain && elem_ != blk::Elem::kF32) {  // the kernels read bf16 NCHW as it is
      blk::to_blocked(be_, *flow.plain, slot(0), elem_, true);
      flow = {nullptr, 0, flow.shape, Layout::kPlain};
    }
    int in = flow.slot < 0 ? 0 : 1 << flow.slot;
    const void* x = read_plain && flow.slot < 0 ? flow.plain->data<float>() : slot(flow.slot);
    if (int8_ && shared_codes_[i] && flow.slot >= 0 && flow.layout != Layout::kCodes) {
      const int q = free_slot(in);  // the first convolution's and the shortcut's codes, once
      int8_convs_[i][0].quantize(be_, flow.shape, x, flow.layout, slot(q));
      flow = {nullptr, q, flow.shape, Layout::kCodes};
      in = 1 << q;
      x = slot(q);
    }
    const auto [residual, residual_layout] = residual_slot(i, flow, x);
    const int keep = in | (residual >= 0 ? 1 << residual : 0);
    // int8: the residual read from its own slot where it is codes or the
    // output is (an int8::Residual), else added in place.
    const bool separate =
        residual >= 0 && (residual_layout == Layout::kCodes || output_layout(i) == Layout::kCodes);
    int8::Residual from;
    if (separate) {
      from.data = slot(residual);
      if (residual_layout == Layout::kCodes) from.codes = int8_convs_[i][0].input();
    }
    Shape shape = flow.shape;
    Layout layout = flow.layout;
    int prev = 0;  // the previous convolution's output slot (bit)
    for (std::size_t c = 0; c < step.chain.size(); ++c) {
      const bool last = c + 1 == step.chain.size();
      const bool accumulate = last && residual >= 0 && !separate;
      const int out = accumulate ? residual : free_slot(keep | prev);
      const Layout step_out =
          separate && output_layout(i) == Layout::kBlocked ? Layout::kNhwc : output_layout(i);
      const Layout out_layout = !last        ? (int8_ ? Layout::kCodes : Layout::kBlocked)
                                : accumulate ? residual_layout
                                             : step_out;
      void* y = slot(out);
      conv(i, c, shape, x, layout, y, out_layout, accumulate, last && separate ? &from : nullptr);
      shape = conv2d_output_shape(shape, step.chain[c].w.shape(), step.chain[c].params);
      x = y, layout = out_layout, prev = 1 << out;
      flow = {nullptr, out, shape, out_layout};
    }
  }

  CpuBackend& be_;
  std::vector<InferenceStep> steps_;
  std::vector<std::vector<blk::Conv>> convs_;        // per step: the chain's, then the shortcut's
  std::vector<std::vector<int8::Conv>> int8_convs_;  // the same in int8 (convs_ empty then)
  std::vector<bool> writes_codes_;       // per step: it writes the next convolution step's codes
  std::vector<bool> shared_codes_;       // per step: its first convolution and shortcut share codes
  std::vector<std::size_t> first_conv_;  // per step: its first convolution's index
  std::size_t conv_count_ = 0;
  std::vector<ActivationRange>* ranges_ = nullptr;  // calibrating: the inputs' ranges
  std::vector<bool> seen_;                          // per convolution: a range recorded
  std::vector<Tensor> plain_inputs_, outputs_;      // per step
  std::array<Tensor, kSlots> slots_;
  Tensor output_;  // a network ending in a convolution, made plain
  Shape planned_for_;
  blk::Elem elem_;
  bool int8_;
};

bool blockable(const std::vector<InferenceStep>& steps) {
  for (const auto& step : steps) {
    for (const auto& fc : step.chain)
      if (fc.params.groups != 1) return false;
    if (step.shortcut && step.shortcut->params.groups != 1) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<InferenceProgram> CpuBackend::compile_inference(std::vector<InferenceStep> steps,
                                                                ProgramLayout layout,
                                                                Precision precision) {
  const bool blocks = blk::available(*this) && blockable(steps);
  if (precision == Precision::kBf16) {
    if (inference_precision(precision) == PrecisionSupport::kNone || !blocks) {
      throw Unsupported("cpu: bf16 inference needs oneDNN's bf16 kernels (AVX-512; oneDNN runs " +
                        blk::isa_name() + " here) and convolutions of one group");
    }
    if (layout == ProgramLayout::kPlain) {
      throw InvalidArgument("cpu: bf16 inference runs in the blocked layout only, not kPlain");
    }
    return std::make_unique<BlockedProgram>(*this, std::move(steps), blk::Elem::kBf16);
  }
  if (precision == Precision::kInt8) {
    if (inference_precision(precision) == PrecisionSupport::kNone || !blocks) {
      throw Unsupported(
          "cpu: int8 inference needs oneDNN's int8 kernels (AVX2 or later; oneDNN "
          "runs " +
          blk::isa_name() + " here) and convolutions of one group");
    }
    if (layout == ProgramLayout::kPlain) {
      throw InvalidArgument("cpu: int8 inference runs in the blocked layout only, not kPlain");
    }
    for (std::size_t i = 0; i < steps.size(); ++i) {
      bool ranged = true;
      for (const auto& fc : steps[i].chain) ranged = ranged && fc.input_range.has_value();
      if (steps[i].shortcut) ranged = ranged && steps[i].shortcut->input_range.has_value();
      if (!ranged) {
        throw InvalidArgument("cpu: int8 inference: a convolution of step '" + steps[i].name +
                              "' has no calibrated input range (calibrate the model: stoke "
                              "quantize --precision int8 --calibrate DIR)");
      }
    }
    return std::make_unique<BlockedProgram>(*this, std::move(steps), blk::Elem::kF32, true);
  }
  if (precision != Precision::kFp32) {
    throw Unsupported(std::string("cpu: inference in ") + to_string(precision) +
                      " is not available on the CPU; use fp32, bf16 or int8");
  }
  if (layout == ProgramLayout::kBackend && blocks) {
    return std::make_unique<BlockedProgram>(*this, std::move(steps), blk::Elem::kF32);
  }
  return make_plain_program(*this, std::move(steps));
}

PrecisionSupport CpuBackend::inference_precision(Precision precision) const noexcept {
  if (precision == Precision::kFp32) return PrecisionSupport::kNative;
  if (precision == Precision::kInt8) {  // the blocked program only, as bf16
    if (!dnnl_convolutions()) return PrecisionSupport::kNone;
    const int level = int8::support();
    return level == 2   ? PrecisionSupport::kNative
           : level == 1 ? PrecisionSupport::kEmulated
                        : PrecisionSupport::kNone;
  }
  // bf16 runs in oneDNN's blocked program only (not on the gemm convolutions).
  if (precision != Precision::kBf16 || !dnnl_convolutions()) return PrecisionSupport::kNone;
  switch (blk::bf16_support()) {
    case 2:
      return PrecisionSupport::kNative;
    case 1:
      return PrecisionSupport::kEmulated;
    default:
      return PrecisionSupport::kNone;
  }
}

std::unique_ptr<Backend> CpuBackend::make_worker() const {
  auto worker = std::make_unique<CpuBackend>(0, context_);
  worker->use_gemm_convolutions(gemm_convolutions_);
  worker->training_precision_ = training_precision_;
  return worker;
}

}  // namespace stoke::cpu
