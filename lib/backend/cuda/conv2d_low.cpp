// Mixed-precision training convolutions (Backend::set_training_precision
// bf16 or fp16) with cuDNN: the operands rounded to the 16-bit type into the
// staging block, each pass in cuDNN's pseudo-bf16 / pseudo-half configuration
// (16-bit tensors, fp32 accumulation, tensor cores), its result widened back
// into the caller's fp32 tensor; the bias and its gradient stay fp32. bf16 has
// the same contract as the CPU's oneDNN bf16 path
// (tests/unit/op_suite_bf16_train_test.cpp runs both); fp16 needs the
// trainer's loss scaling (its range ends at 65504).
// bf16 inference programs run the plain program with this thread's
// convolutions in bf16 (op_suite_fused_test.cpp's bf16 case).
#include <algorithm>
#include <array>

#include "backend/cuda/check.hpp"
#include "backend/cuda/conv2d.hpp"
#include "stoke/error.hpp"
#include "stoke/program.hpp"

namespace stoke::cuda {
namespace {

// bf16 inference programs running on this thread (their convolutions in bf16).
thread_local int bf16_programs_running = 0;

// The plain program (NCHW between steps) with every convolution in bf16: x
// and the weights rounded, fp32 accumulation, the bias, residual and ReLU in
// fp32, outputs fp32. Only the calling thread's convolutions change: a
// training step on another thread keeps its precision.
class Bf16Program final : public InferenceProgram {
 public:
  Bf16Program(Backend& backend, std::vector<InferenceStep> steps)
      : InferenceProgram(steps), plain_(make_plain_program(backend, std::move(steps))) {}
  const Tensor& forward(const Tensor& x) override {
    struct Running {  // counted for the forward, an exception's unwinding included
      Running() { ++bf16_programs_running; }
      ~Running() { --bf16_programs_running; }
    } running;
    const Tensor* y = nullptr;
    record_through(*plain_, [&] { y = &plain_->forward(x); });
    return *y;
  }
  void weights_changed() override { plain_->weights_changed(); }
  std::string implementations() const override { return "cuDNN bf16 (tensor cores)"; }

 private:
  std::unique_ptr<InferenceProgram> plain_;
};

// 16-bit elements per staged operand, rounded up to 256 bytes (cuDNN's
// alignment for tensor-core algorithms is 16).
std::size_t staged(std::int64_t elements) {
  constexpr std::size_t kAlign = 128;  // elements of 2 bytes
  return (static_cast<std::size_t>(elements) + kAlign - 1) / kAlign * kAlign;
}

// Pointers to `count` consecutive operands of the given sizes in one block.
template <std::size_t N>
std::array<std::uint16_t*, N> carve(void* block, const std::array<std::int64_t, N>& elements) {
  std::array<std::uint16_t*, N> out{};
  auto* p = static_cast<std::uint16_t*>(block);
  for (std::size_t i = 0; i < N; ++i) {
    out[i] = p;
    p += staged(elements[i]);
  }
  return out;
}

template <std::size_t N>
std::size_t staged_bytes(const std::array<std::int64_t, N>& elements) {
  std::size_t total = 0;
  for (std::int64_t e : elements) total += staged(e) * sizeof(std::uint16_t);
  return total;
}

}  // namespace

Precision CudaBackend::convolution_precision() const noexcept {
  return bf16_programs_running > 0 ? Precision::kBf16 : training_precision_;
}

PrecisionSupport CudaBackend::inference_precision(Precision precision) const noexcept {
  if (precision == Precision::kBf16)
    return compute_capability_ >= 80 ? PrecisionSupport::kNative : PrecisionSupport::kNone;
  return Backend::inference_precision(precision);
}

std::unique_ptr<InferenceProgram> CudaBackend::compile_inference(std::vector<InferenceStep> steps,
                                                                 ProgramLayout layout,
                                                                 Precision precision) {
  if (precision == Precision::kBf16 && inference_precision(precision) != PrecisionSupport::kNone) {
    return std::make_unique<Bf16Program>(*this, std::move(steps));
  }
  return Backend::compile_inference(std::move(steps), layout, precision);
}

PrecisionSupport CudaBackend::training_precision_support(Precision precision) const noexcept {
  if (precision == Precision::kBf16)
    return compute_capability_ >= 80 ? PrecisionSupport::kNative : PrecisionSupport::kNone;
  if (precision == Precision::kFp16)
    return compute_capability_ >= 70 ? PrecisionSupport::kNative : PrecisionSupport::kNone;
  return Backend::training_precision_support(precision);
}

void CudaBackend::set_training_precision(Precision precision) {
  if (precision == Precision::kFp32 ||
      ((precision == Precision::kBf16 || precision == Precision::kFp16) &&
       training_precision_support(precision) != PrecisionSupport::kNone)) {
    training_precision_ = precision;
    return;
  }
  if (precision == Precision::kBf16 || precision == Precision::kFp16) {
    throw Unsupported(name() + ": training in " + to_string(precision) + " needs " +
                      to_string(precision) + " tensor cores (compute capability " +
                      (precision == Precision::kBf16 ? "8.0" : "7.0") +
                      " or later); this device is " + std::to_string(compute_capability_ / 10) +
                      "." + std::to_string(compute_capability_ % 10) + "; train in fp32");
  }
  Backend::set_training_precision(precision);
}

void CudaBackend::narrow(const Tensor& x, void* low, Precision precision) {
  const float* xp = x.data<float>();
  const long long n = x.numel();
  launch_n(precision == Precision::kBf16 ? "stoke_to_bf16" : "stoke_to_f16", n, {&xp, &low, &n});
}

void CudaBackend::widen(const void* low, Tensor& y, Precision precision) {
  float* yp = y.data<float>();
  const long long n = y.numel();
  launch_n(precision == Precision::kBf16 ? "stoke_from_bf16" : "stoke_from_f16", n,
           {&low, &yp, &n});
}

void CudaBackend::conv2d_forward_low(const Tensor& x, const Tensor& w, const Tensor& bias,
                                     Tensor& y, const Conv2dParams& params) {
  const auto lock = workspace_lock();
  const Precision low = convolution_precision();
  const auto setup = conv_setup("conv2d_forward", x.shape(), w.shape(), params);
  const ConvSetup& s = *setup;
  const std::array<std::int64_t, 3> sizes{x.numel(), w.numel(), y.numel()};
  const auto [x16, w16, y16] = carve(staging(staged_bytes(sizes)), sizes);
  narrow(x, x16, low);
  narrow(w, w16, low);
  const ConvAlgoChoice c = choose_conv_algo(kConvForward, ConvCall{s, x16, w16, y16});
  s.set_math(c.math_type);
  void* ws = workspace(c.workspace_bytes);
  const float one = 1.0f, zero = 0.0f;
  cudnnHandle_t h = cudnn();
  STOKE_CUDNN_CHECK(cudnnConvolutionForward(h, &one, s.x(), x16, s.w(), w16, s.conv(),
                                            static_cast<cudnnConvolutionFwdAlgo_t>(c.algorithm), ws,
                                            c.workspace_bytes, &zero, s.y(), y16));
  widen(y16, y, low);
  if (bias.defined()) {
    const TensorDesc b(1, static_cast<int>(w.dim(0)), 1, 1);
    const TensorDesc yd(y.shape());
    STOKE_CUDNN_CHECK(cudnnAddTensor(h, &one, b.get(), bias.raw(), &one, yd.get(), y.raw()));
  }
}

void CudaBackend::conv2d_backward_low(const Tensor& x, const Tensor& w, const Tensor& dy,
                                      Tensor& dx, Tensor& dw, Tensor& db,
                                      const Conv2dParams& params) {
  const auto lock = workspace_lock();
  const Precision low = convolution_precision();
  const auto setup = conv_setup("conv2d_backward", x.shape(), w.shape(), params);
  const ConvSetup& s = *setup;
  const float one = 1.0f, zero = 0.0f;
  if (db.defined()) {  // from the fp32 gradient
    const TensorDesc b(1, static_cast<int>(w.dim(0)), 1, 1);
    const TensorDesc dyd(dy.shape());
    STOKE_CUDNN_CHECK(
        cudnnConvolutionBackwardBias(cudnn(), &one, dyd.get(), dy.raw(), &zero, b.get(), db.raw()));
  }
  const std::array<std::int64_t, 5> sizes{x.numel(), w.numel(), dy.numel(), w.numel(), x.numel()};
  const auto [x16, w16, dy16, dw16, dx16] = carve(staging(staged_bytes(sizes)), sizes);
  narrow(x, x16, low);
  narrow(w, w16, low);
  narrow(dy, dy16, low);
  {
    const ConvAlgoChoice c = choose_conv_algo(kConvBackwardFilter, ConvCall{s, x16, dy16, dw16});
    s.set_math(c.math_type);
    void* ws = workspace(c.workspace_bytes);
    STOKE_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(cudnn(), &one, s.x(), x16, s.y(), dy16, s.conv(),
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algorithm),
                                       ws, c.workspace_bytes, &zero, s.w(), dw16));
    widen(dw16, dw, low);
  }
  if (dx.defined()) {
    const ConvAlgoChoice c = choose_conv_algo(kConvBackwardData, ConvCall{s, w16, dy16, dx16});
    s.set_math(c.math_type);
    void* ws = workspace(c.workspace_bytes);
    STOKE_CUDNN_CHECK(
        cudnnConvolutionBackwardData(cudnn(), &one, s.w(), w16, s.y(), dy16, s.conv(),
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algorithm), ws,
                                     c.workspace_bytes, &zero, s.x(), dx16));
    widen(dx16, dx, low);
  }
}

}  // namespace stoke::cuda
