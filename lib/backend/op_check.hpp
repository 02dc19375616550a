// The argument checks of the backend's front doors (ops.cpp): one OpCheck per
// op call validates every tensor once, for every backend, before the
// backend's implementation (do_<op>) runs.
//
// Errors name the op, the backend and the tensor:
//   "conv2d_forward on cpu: tensor 'y' has shape (1, 2, 4, 4), expected (1, 2, 3, 3)".
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "stoke/backend.hpp"
#include "stoke/export.hpp"

namespace stoke::detail {

// Whether an output may be exactly the memory of an input (same bytes, same
// shape): elementwise ops read element i before they write it.
enum class Aliasing : std::uint8_t { kNone, kExactAllowed };

class STOKE_INTERNAL OpCheck {
 public:
  OpCheck(const Backend& backend, Op op, Aliasing aliasing = Aliasing::kNone);

  // Unsupported (naming op, dtype, backend) unless the backend takes t's
  // dtype for this op; InvalidArgument if t is undefined.
  OpCheck& supported(const char* name, const Tensor& t);
  // A defined tensor of rank `rank` (any dtype, any backend): what the output
  // shapes are computed from.
  OpCheck& rank(const char* name, const Tensor& t, int rank);
  // Inputs and outputs: defined, of `dtype`, on this backend, of `shape`.
  // Outputs are checked against the inputs and each other for overlap by done().
  OpCheck& input(const char* name, const Tensor& t, const Shape& shape,
                 DType dtype = DType::kFloat32);
  OpCheck& output(const char* name, const Tensor& t, const Shape& shape);
  // The same, skipped when t is undefined (optional bias, first-layer dx).
  OpCheck& optional_input(const char* name, const Tensor& t, const Shape& shape);
  OpCheck& optional_output(const char* name, const Tensor& t, const Shape& shape);
  // InvalidArgument "<op> on <backend>: <why>" unless ok.
  OpCheck& require(bool ok, const std::string& why);
  // The aliasing rule over every output checked so far.
  void done() const;

  [[noreturn]] void fail(const std::string& why) const;

 private:
  struct Named {
    const char* name;
    const Tensor* tensor;
  };
  // No op has more than five inputs or outputs; fixed arrays keep the checks
  // free of heap allocations on every op call.
  static constexpr std::size_t kMaxTensors = 8;
  struct NamedList {
    std::array<Named, kMaxTensors> items{};
    std::size_t size = 0;
    const Named* begin() const { return items.data(); }
    const Named* end() const { return items.data() + size; }
  };
  void add(NamedList& list, const char* name, const Tensor& t);
  void check_tensor(const char* name, const Tensor& t, const Shape& shape, DType dtype) const;
  std::string where() const;

  const Backend& backend_;
  Op op_;
  Aliasing aliasing_;
  NamedList inputs_, outputs_;
};

// The output shape of a convolution of x by w (both rank 4), a bad window
// reported through `check` (conv2d_forward, conv2d_backward, conv2d_fused_forward).
STOKE_INTERNAL Shape checked_conv_output(OpCheck& check, const Tensor& x, const Tensor& w,
                                         const Conv2dParams& p);

// The checks of a training batch norm's arguments (batch_norm_forward_training
// and its fused ReLU variant), done() included.
STOKE_INTERNAL void check_batch_norm_training(OpCheck& check, const Tensor& x, const Tensor& gamma,
                                              const Tensor& beta, const Tensor& y,
                                              const Tensor& running_mean, const Tensor& running_var,
                                              const Tensor& save_mean, const Tensor& save_invstd,
                                              const BatchNormParams& params);

}  // namespace stoke::detail
