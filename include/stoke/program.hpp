// A network's eval-mode forward handed to the backend as one program: a
// chain of steps in the op list's terms (fused convolutions, residual
// blocks, pooling, the classifier head), compiled once per network by
// Backend::compile_inference. The backend decides how to run it: the default
// runs every step through the front doors with activations in NCHW in four
// shared buffers; the CPU backend with oneDNN keeps activations in its
// blocked layout between steps. nn::Model's eval forward, the Predictor,
// evaluation and validation inside fit() all run such a program
// (lib/nn/fused_inference.cpp builds it).
//
// A program owns every buffer it writes; it reads the weights through the
// steps' tensors, which must stay alive. Two programs of one network on two
// backends (a CPU backend per thread) run at the same time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stoke/backend.hpp"

namespace stoke {

// The values a convolution's input took over a calibration set (int8
// inference quantizes the input with a scale derived from them).
struct ActivationRange {
  float min = 0.0f, max = 0.0f;
};

// y = activation(conv(x, w) + bias [+ residual]): batch norm already folded
// into w and bias by the caller.
struct FusedConv {
  Tensor w;     // (K, C/groups, R, S)
  Tensor bias;  // (K) or undefined
  Conv2dParams params;
  Activation activation = Activation::kIdentity;
  // Precision::kInt8 only: the calibrated range of x (every convolution of
  // an int8 program needs one; docs/precision.md).
  std::optional<ActivationRange> input_range;
};

struct InferenceStep {
  enum class Kind : std::uint8_t {
    kConv,           // chain[0]
    kBlock,          // chain in order, the last adding the residual: shortcut(x) or x
    kMaxPool,        // pool
    kAvgPool,        // pool
    kGlobalAvgPool,  // (N, C, H, W) -> (N, C)
    kLinear,         // linear: (N, K) -> (N, M); a 4-D input is flattened first
    kRelu,
    kIdentity,  // eval-mode dropout, flatten: the input (reshaped to output_shape)
    kLayer,     // run, on a plain input: a layer the program cannot express
  };
  Kind kind = Kind::kLayer;
  std::string name;  // the profile's label
  std::vector<FusedConv> chain;
  std::optional<FusedConv> shortcut;
  Pool2dParams pool;
  Tensor linear_w, linear_bias;  // (M, K), (M) or undefined
  // kLayer: the step's output for x (valid until its next call), its output
  // shape; kIdentity: its output shape. Not safe to share between programs
  // running at once: a program with kLayer steps is not (concurrent() false).
  std::function<const Tensor&(const Tensor&)> run;
  std::function<Shape(const Shape&)> output_shape;
};

// The output shape of a step for input `in` (InvalidArgument for a bad shape).
STOKE_API Shape step_output_shape(const InferenceStep& step, const Shape& in);

// kBackend: the backend's own choice (its layouts); kPlain: NCHW between steps
// on every backend (tests compare the two).
enum class ProgramLayout : std::uint8_t { kBackend, kPlain };

class STOKE_API InferenceProgram {
 public:
  virtual ~InferenceProgram();
  // x (N, C, H, W) -> the last step's output; valid until the next forward.
  // Buffers are sized for the largest input seen and reused.
  virtual const Tensor& forward(const Tensor& x) = 0;
  // The steps' weight tensors were rewritten in place: drop derived copies.
  virtual void weights_changed() = 0;
  // Whether activations stay in a layout of the backend's between steps.
  virtual bool blocked() const noexcept { return false; }
  // The kernels the convolutions run (the bench's profile; may be "").
  virtual std::string implementations() const { return ""; }
  // int8 calibration: while `ranges` is not null, each forward widens
  // (*ranges)[j] to the values the input of convolution j took, j counting
  // the steps' convolutions in order, a block's chain before its shortcut
  // (the vector is resized to that count; a new entry starts at its first
  // input's range). Returns false where the program cannot record them.
  virtual bool record_conv_input_ranges(std::vector<ActivationRange>* ranges) {
    return ranges == nullptr;
  }
  // True unless a kLayer step shares state outside the program.
  bool concurrent() const noexcept { return concurrent_; }

  // The bench's profile: once on, each forward records every step's wall
  // time (ms) under its name.
  void record_step_times(bool on) noexcept { record_ = on; }
  const std::vector<std::pair<std::string, double>>& step_times() const noexcept {
    return step_times_;
  }

 protected:
  explicit InferenceProgram(const std::vector<InferenceStep>& steps);
  // Runs f(), adding its wall time under `name` when recording.
  void timed(const std::string& name, const std::function<void()>& f);
  void clear_step_times() { step_times_.clear(); }
  // A program that runs another inside (a precision wrapper): the inner one
  // records when this one does, and its times become this one's.
  void record_through(InferenceProgram& inner, const std::function<void()>& forward);

 private:
  bool concurrent_ = true;
  bool record_ = false;
  std::vector<std::pair<std::string, double>> step_times_;
};

// The default program: every step through the backend's front doors, NCHW
// between steps (lib/backend/program.cpp). Backends without a layout of
// their own return this from compile_inference.
STOKE_API std::unique_ptr<InferenceProgram> make_plain_program(Backend& backend,
                                                               std::vector<InferenceStep> steps);

}  // namespace stoke
