// Tensor and Storage: memory through the owning backend, views over it.
#include "stoke/tensor.hpp"

#include <sstream>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke {

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat16:
      return 2;
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
      return 4;
    case DType::kUInt8:
      return 1;
  }
  return 0;
}

const char* to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
    case DType::kUInt8:
      return "uint8";
  }
  return "?";
}

std::int64_t shape_numel(const Shape& shape) noexcept {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream out;
  out << '(';
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ')';
  return out.str();
}

Storage::Storage(Backend& backend, std::size_t bytes)
    : backend_(&backend), data_(bytes ? backend.allocate(bytes) : nullptr), bytes_(bytes) {}

Storage::~Storage() {
  if (data_) backend_->free(data_, bytes_);
}

Tensor::Tensor(Backend& backend, Shape shape, DType dtype, Layout layout)
    : shape_(std::move(shape)), dtype_(dtype), layout_(layout) {
  for (std::int64_t d : shape_) {
    if (d < 0)
      throw InvalidArgument("Tensor: negative dimension in shape " + shape_to_string(shape_));
  }
  storage_ = std::make_shared<Storage>(backend, bytes());
}

std::int64_t Tensor::dim(int i) const {
  const int r = rank();
  const int k = i < 0 ? i + r : i;
  if (k < 0 || k >= r) {
    throw InvalidArgument("Tensor::dim(" + std::to_string(i) + ") out of range for shape " +
                          shape_to_string(shape_));
  }
  return shape_[static_cast<std::size_t>(k)];
}

Backend& Tensor::backend() const {
  if (!storage_) throw InvalidArgument("Tensor::backend() on an undefined tensor");
  return storage_->backend();
}

void* Tensor::raw() const noexcept {
  if (!storage_ || !storage_->data()) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_bytes_;
}

void Tensor::check_dtype(DType expected) const {
  if (dtype_ != expected) {
    throw InvalidArgument(std::string("Tensor::data: tensor ") + shape_to_string(shape_) + " is " +
                          to_string(dtype_) + ", accessed as " + to_string(expected));
  }
}

template <>
float* Tensor::data<float>() const {
  check_dtype(DType::kFloat32);
  return static_cast<float*>(raw());
}
template <>
std::int32_t* Tensor::data<std::int32_t>() const {
  check_dtype(DType::kInt32);
  return static_cast<std::int32_t*>(raw());
}
template <>
std::uint8_t* Tensor::data<std::uint8_t>() const {
  check_dtype(DType::kUInt8);
  return static_cast<std::uint8_t*>(raw());
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel()) {
    throw InvalidArgument("Tensor::reshaped: " + shape_to_string(shape_) + " has " +
                          std::to_string(numel()) + " elements, " + shape_to_string(shape) +
                          " needs " + std::to_string(shape_numel(shape)));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view(std::int64_t offset, Shape shape) const {
  if (offset < 0 || offset + shape_numel(shape) > numel()) {
    throw InvalidArgument("Tensor::view: elements [" + std::to_string(offset) + ", " +
                          std::to_string(offset + shape_numel(shape)) + ") outside " +
                          shape_to_string(shape_));
  }
  Tensor t = *this;
  t.offset_bytes_ += static_cast<std::size_t>(offset) * dtype_size(dtype_);
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::copy_from_host(const void* host) {
  backend().copy(raw(), host, bytes(), CopyKind::kHostToDevice);
  backend().synchronize();
}

void Tensor::copy_to_host(void* host) const {
  backend().copy(host, raw(), bytes(), CopyKind::kDeviceToHost);
  backend().synchronize();
}

std::vector<float> Tensor::to_vector() const {
  check_dtype(DType::kFloat32);
  std::vector<float> out(static_cast<std::size_t>(numel()));
  if (!out.empty()) copy_to_host(out.data());
  return out;
}

}  // namespace stoke
