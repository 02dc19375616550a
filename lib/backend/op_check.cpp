// OpCheck, the op names generated from STOKE_OPS, and the output-shape
// functions every backend's ops agree on.
#include "backend/op_check.hpp"

#include <cstdint>

#include "stoke/error.hpp"

namespace stoke {

const char* to_string(Op op) noexcept {
  switch (op) {
#define STOKE_OP_NAME(kind, name, params, args) \
  case Op::kind:                                \
    return #name;
    STOKE_OPS(STOKE_OP_NAME)
#undef STOKE_OP_NAME
  }
  return "?";
}

bool Backend::supports(Op /*op*/, DType dtype) const noexcept {
  return dtype == DType::kFloat32;
}

std::int64_t conv_output_size(std::int64_t in, int kernel, int stride, int pad,
                              int dilation) noexcept {
  const std::int64_t span = static_cast<std::int64_t>(dilation) * (kernel - 1) + 1;
  const std::int64_t padded = in + 2 * static_cast<std::int64_t>(pad);
  if (padded < span || stride <= 0) return 0;
  return (padded - span) / stride + 1;
}

Shape pool2d_output_shape(const Shape& x, const Pool2dParams& p, const char* op) {
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument(std::string(op) + ": x " + shape_to_string(x) + ", kernel " +
                          std::to_string(p.kernel_h) + "x" + std::to_string(p.kernel_w) + ": " +
                          why);
  };
  if (x.size() != 4) fail("x must be (N, C, H, W)");
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1)
    fail("kernel and stride must be >= 1");
  if (p.pad_h < 0 || p.pad_w < 0 || 2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w)
    fail("padding must be in [0, kernel / 2]");
  const std::int64_t oh = conv_output_size(x[2], p.kernel_h, p.stride_h, p.pad_h);
  const std::int64_t ow = conv_output_size(x[3], p.kernel_w, p.stride_w, p.pad_w);
  if (oh <= 0 || ow <= 0) fail("the window does not fit the padded input");
  return {x[0], x[1], oh, ow};
}

Shape conv2d_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  const auto fail = [&](const std::string& why) {
    throw InvalidArgument("conv2d: x " + shape_to_string(x) + ", w " + shape_to_string(w) + ": " +
                          why);
  };
  if (x.size() != 4 || w.size() != 4) fail("x and w must be 4-d (N, C, H, W) and (K, C/g, R, S)");
  if (p.groups < 1 || p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1 ||
      p.pad_h < 0 || p.pad_w < 0) {
    fail("groups, strides and dilations must be >= 1 and padding >= 0");
  }
  if (x[1] % p.groups != 0 || w[0] % p.groups != 0) fail("channels not divisible by groups");
  if (w[1] * p.groups != x[1]) fail("w's input channels times groups must equal x's channels");
  const std::int64_t out_h =
      conv_output_size(x[2], static_cast<int>(w[2]), p.stride_h, p.pad_h, p.dilation_h);
  const std::int64_t out_w =
      conv_output_size(x[3], static_cast<int>(w[3]), p.stride_w, p.pad_w, p.dilation_w);
  if (out_h <= 0 || out_w <= 0) fail("the kernel does not fit the padded input");
  return {x[0], w[0], out_h, out_w};
}

}  // namespace stoke

namespace stoke::detail {

namespace {

// Byte ranges [begin, end) of a tensor's memory.
bool overlap(const Tensor& a, const Tensor& b) {
  if (a.bytes() == 0 || b.bytes() == 0) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.raw());
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.raw());
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

bool same_memory(const Tensor& a, const Tensor& b) {
  return a.raw() == b.raw() && a.shape() == b.shape() && a.dtype() == b.dtype();
}

}  // namespace

OpCheck::OpCheck(const Backend& backend, Op op, Aliasing aliasing)
    : backend_(backend), op_(op), aliasing_(aliasing) {}

std::string OpCheck::where() const {
  return std::string(to_string(op_)) + " on " + backend_.name();
}

void OpCheck::fail(const std::string& why) const {
  throw InvalidArgument(where() + ": " + why);
}

OpCheck& OpCheck::require(bool ok, const std::string& why) {
  if (!ok) fail(why);
  return *this;
}

OpCheck& OpCheck::supported(const char* name, const Tensor& t) {
  if (!t.defined()) fail(std::string("tensor '") + name + "' is undefined");
  if (!backend_.supports(op_, t.dtype())) {
    throw Unsupported(where() + ": " + to_string(t.dtype()) +
                      " tensors are not supported (tensor '" + name + "')");
  }
  return *this;
}

OpCheck& OpCheck::rank(const char* name, const Tensor& t, int rank) {
  if (!t.defined()) fail(std::string("tensor '") + name + "' is undefined");
  if (t.rank() != rank) {
    fail(std::string("tensor '") + name + "' has shape " + shape_to_string(t.shape()) +
         ", expected rank " + std::to_string(rank));
  }
  return *this;
}

void OpCheck::check_tensor(const char* name, const Tensor& t, const Shape& shape,
                           DType dtype) const {
  const std::string tensor = std::string("tensor '") + name + "'";
  if (!t.defined()) fail(tensor + " is undefined, expected " + shape_to_string(shape));
  if (t.dtype() != dtype)
    fail(tensor + " is " + to_string(t.dtype()) + ", expected " + to_string(dtype));
  const Backend& home = t.backend();
  // CPU backends (the shared one, capped ones) share host memory.
  if (&home != &backend_ && !(home.is_host() && backend_.is_host())) {
    fail(tensor + " lives on " + home.name() + ", not on this backend");
  }
  if (t.shape() != shape) {
    fail(tensor + " has shape " + shape_to_string(t.shape()) + ", expected " +
         shape_to_string(shape));
  }
}

void OpCheck::add(NamedList& list, const char* name, const Tensor& t) {
  if (list.size == kMaxTensors) fail("more tensors than OpCheck holds");  // a front door's bug
  list.items[list.size++] = {name, &t};
}

OpCheck& OpCheck::input(const char* name, const Tensor& t, const Shape& shape, DType dtype) {
  check_tensor(name, t, shape, dtype);
  add(inputs_, name, t);
  return *this;
}

OpCheck& OpCheck::output(const char* name, const Tensor& t, const Shape& shape) {
  check_tensor(name, t, shape, DType::kFloat32);
  add(outputs_, name, t);
  return *this;
}

OpCheck& OpCheck::optional_input(const char* name, const Tensor& t, const Shape& shape) {
  return t.defined() ? input(name, t, shape) : *this;
}

OpCheck& OpCheck::optional_output(const char* name, const Tensor& t, const Shape& shape) {
  return t.defined() ? output(name, t, shape) : *this;
}

void OpCheck::done() const {
  for (std::size_t o = 0; o < outputs_.size; ++o) {
    const Named& out = outputs_.items[o];
    for (const Named& in : inputs_) {
      if (!overlap(*out.tensor, *in.tensor)) continue;
      if (aliasing_ == Aliasing::kExactAllowed && same_memory(*out.tensor, *in.tensor)) continue;
      fail(std::string("output '") + out.name + "' overlaps input '" + in.name + "'" +
           (aliasing_ == Aliasing::kExactAllowed ? " (only exact aliasing is allowed)" : ""));
    }
    for (std::size_t p = 0; p < o; ++p) {
      if (overlap(*out.tensor, *outputs_.items[p].tensor)) {
        fail(std::string("outputs '") + outputs_.items[p].name + "' and '" + out.name +
             "' overlap");
      }
    }
  }
}

}  // namespace stoke::detail

namespace stoke::detail {

Shape checked_conv_output(OpCheck& check, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  check.rank("x", x, 4).rank("w", w, 4);
  try {
    return conv2d_output_shape(x.shape(), w.shape(), p);
  } catch (const InvalidArgument& e) {
    check.fail(e.what());
  }
}

void check_batch_norm_training(OpCheck& check, const Tensor& x, const Tensor& gamma,
                               const Tensor& beta, const Tensor& y, const Tensor& running_mean,
                               const Tensor& running_var, const Tensor& save_mean,
                               const Tensor& save_invstd, const BatchNormParams& params) {
  check.supported("x", x).rank("x", x, 4);
  const Shape c{x.dim(1)};
  check.input("x", x, x.shape()).input("gamma", gamma, c).input("beta", beta, c);
  check.output("y", y, x.shape()).output("running_mean", running_mean, c);
  check.output("running_var", running_var, c).output("save_mean", save_mean, c);
  check.output("save_invstd", save_invstd, c);
  check.require(params.epsilon > 0.0f, "epsilon must be > 0").done();
}

}  // namespace stoke::detail
