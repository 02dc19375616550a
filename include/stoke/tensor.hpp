// Tensors: a shape, a dtype, a layout and memory owned through the backend
// (device) that allocated it. A Tensor is a cheap handle: copies share the
// storage; views (reshaped, slice) share it too. Element access through data()
// gives the backend's pointer, which the CPU can read only when
// backend().is_host() is true.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoke/export.hpp"

namespace stoke {

class Backend;

// float16/bfloat16 are declared for the CUDA backend's mixed precision; the
// CPU backend computes in float32 only (supports() says which ops take which).
enum class DType : std::uint8_t { kFloat32, kFloat16, kBFloat16, kInt32, kUInt8 };

// NCHW is what every op takes now; NHWC is planned for tensor-core paths.
enum class Layout : std::uint8_t { kNCHW, kNHWC };

STOKE_API std::size_t dtype_size(DType dtype) noexcept;
STOKE_API const char* to_string(DType dtype) noexcept;

using Shape = std::vector<std::int64_t>;

// Product of the dimensions (1 for a scalar shape {}).
STOKE_API std::int64_t shape_numel(const Shape& shape) noexcept;
// "(64, 3, 28, 28)"
STOKE_API std::string shape_to_string(const Shape& shape);

// Memory owned by one backend; freed through it when the last Tensor goes.
class STOKE_API Storage {
 public:
  Storage(Backend& backend, std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }
  Backend& backend() const noexcept { return *backend_; }

 private:
  Backend* backend_;
  void* data_;
  std::size_t bytes_;
};

class STOKE_API Tensor {
 public:
  Tensor() = default;
  // Allocates shape_numel(shape) * dtype_size(dtype) bytes from backend.
  // The content is uninitialized.
  Tensor(Backend& backend, Shape shape, DType dtype = DType::kFloat32,
         Layout layout = Layout::kNCHW);

  bool defined() const noexcept { return storage_ != nullptr; }
  const Shape& shape() const noexcept { return shape_; }
  int rank() const noexcept { return static_cast<int>(shape_.size()); }
  // Dimension i; negative i counts from the back. InvalidArgument if out of range.
  std::int64_t dim(int i) const;
  std::int64_t numel() const noexcept { return shape_numel(shape_); }
  std::size_t bytes() const noexcept {
    return static_cast<std::size_t>(numel()) * dtype_size(dtype_);
  }
  DType dtype() const noexcept { return dtype_; }
  Layout layout() const noexcept { return layout_; }
  Backend& backend() const;  // InvalidArgument on an undefined tensor

  void* raw() const noexcept;
  // Typed pointer; InvalidArgument if T does not match dtype().
  template <typename T>
  T* data() const;

  // Same storage, new shape with the same element count.
  Tensor reshaped(Shape shape) const;
  // Same storage: elements [offset, offset + numel(shape)) viewed as shape.
  // Used to carve parameters out of one flat block.
  Tensor view(std::int64_t offset, Shape shape) const;

  // Synchronous transfers between this tensor and host memory of bytes() bytes.
  void copy_from_host(const void* host);
  void copy_to_host(void* host) const;
  std::vector<float> to_vector() const;  // float32 tensors only

 private:
  void check_dtype(DType expected) const;

  std::shared_ptr<Storage> storage_;
  std::size_t offset_bytes_ = 0;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  Layout layout_ = Layout::kNCHW;
};

template <>
STOKE_API float* Tensor::data<float>() const;
template <>
STOKE_API std::int32_t* Tensor::data<std::int32_t>() const;
template <>
STOKE_API std::uint8_t* Tensor::data<std::uint8_t>() const;

}  // namespace stoke
