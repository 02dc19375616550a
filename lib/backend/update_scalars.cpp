// Backend::write_values' host default and the optimizer-scalars checks.
#include "backend/update_scalars.hpp"

#include <cmath>
#include <string>

#include "stoke/error.hpp"

namespace stoke {

void check_write_values(const Tensor& tensor, std::span<const float> values) {
  if (!tensor.defined()) throw InvalidArgument("write_values: undefined tensor");
  if (tensor.dtype() != DType::kFloat32)
    throw InvalidArgument("write_values: float32 tensors only");
  if (values.size() > 4 || static_cast<std::int64_t>(values.size()) > tensor.numel())
    throw InvalidArgument("write_values: " + std::to_string(values.size()) +
                          " values into a tensor of " + std::to_string(tensor.numel()) +
                          " elements (at most 4 per call)");
}

void Backend::write_values(Tensor& tensor, std::span<const float> values) {
  check_write_values(tensor, values);
  copy(tensor.raw(), values.data(), values.size_bytes(), CopyKind::kHostToDevice);
}

void check_update_scalars(const char* op, const Tensor* scalars, std::int64_t count,
                          const Backend& backend) {
  if (!scalars) return;
  const std::string where = std::string(op) + ": scalars";
  if (!scalars->defined()) throw InvalidArgument(where + " tensor is undefined");
  if (scalars->dtype() != DType::kFloat32) throw InvalidArgument(where + " must be float32");
  if (scalars->numel() < count)
    throw InvalidArgument(where + " holds " + std::to_string(scalars->numel()) + " values, needs " +
                          std::to_string(count));
  if (&scalars->backend() != &backend)
    throw InvalidArgument(where + " live on a different backend (" + scalars->backend().name() +
                          ") than the update (" + backend.name() + ")");
}

SgdParams resolve_on_host(const SgdParams& p) {
  SgdParams r = p;
  if (p.scalars) r.lr = p.scalars->data<float>()[0];
  r.scalars = nullptr;
  return r;
}

ResolvedAdam resolve_on_host(const AdamParams& p) {
  ResolvedAdam r{p, 1.0f, 1.0f};
  r.params.scalars = nullptr;
  if (p.scalars) {
    const float* s = p.scalars->data<float>();
    r.params.lr = s[0];
    r.bias1 = s[1];
    r.bias2 = s[2];
  } else {
    if (p.step < 1)
      throw InvalidArgument("adam_update: step is 1-based, got " + std::to_string(p.step));
    r.bias1 = static_cast<float>(
        1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(p.step)));
    r.bias2 = static_cast<float>(
        1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(p.step)));
  }
  return r;
}

}  // namespace stoke
