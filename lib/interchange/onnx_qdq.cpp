// The QDQ int8 export (see onnx_qdq.hpp).
#include "interchange/onnx_qdq.hpp"

#include <cstdint>
#include <string>
#include <string_view>

#include "backend/cpu/conv2d_int8.hpp"
#include "stoke/error.hpp"

namespace stoke::interchange::detail {

namespace {

// TensorProto.DataType (onnx/onnx.proto3).
constexpr int kUInt8 = 2, kInt8 = 3;

template <class T>
std::string_view raw(const std::vector<T>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

}  // namespace

QdqConvolutions::QdqConvolutions(OnnxGraph& g, std::vector<std::pair<float, float>> ranges)
    : g_(g), ranges_(std::move(ranges)) {
  if (ranges_.empty()) return;
  g_.quantize_conv = [this](const std::string& conv, const std::string& x,
                            const std::vector<std::int64_t>& dims,
                            const std::vector<float>& w) { return quantize(conv, x, dims, w); };
}

void QdqConvolutions::check_all_used() const {
  if (used_ != ranges_.size()) {
    throw InvalidArgument("export_onnx: " + std::to_string(ranges_.size()) +
                          " int8 input ranges for a model with " + std::to_string(used_) +
                          " convolutions");
  }
}

std::pair<std::string, std::string> QdqConvolutions::quantize(const std::string& conv,
                                                              const std::string& x,
                                                              const std::vector<std::int64_t>& dims,
                                                              const std::vector<float>& w) {
  if (used_ == ranges_.size()) {
    throw InvalidArgument("export_onnx: " + std::to_string(ranges_.size()) +
                          " int8 input ranges, but the model has more convolutions");
  }
  const auto [lo, hi] = ranges_[used_++];
  // The VNNI rule (u8 codes 0..255): what stoke runs where int8 is native;
  // without VNNI stoke's own u8 codes stop at 127 (reduce_range) and stay
  // within one such step of these.
  const cpu::int8::InputQuantization in = cpu::int8::input_quantization({lo, hi}, false);
  const std::string q = conv + ".input";
  const int code = in.is_unsigned ? kUInt8 : kInt8;
  const std::vector<std::int8_t> zero(1, 0);
  const std::string s_x = g_.initializer(q + ".scale", {}, {in.scale});
  const std::string z_x = g_.raw_initializer(q + ".zero_point", {}, code, raw(zero));
  const std::string xq = g_.node("QuantizeLinear", {x, s_x, z_x}, q + ".quantized");
  const std::string xd = g_.node("DequantizeLinear", {xq, s_x, z_x}, q + ".dequantized");

  const std::int64_t k = dims[0], per = dims[1] * dims[2] * dims[3];
  const std::vector<float> s_w = cpu::int8::weight_scales(w.data(), k, per);
  const std::vector<float> codes = cpu::int8::quantize_weights(w.data(), k, per, s_w);
  const std::vector<std::int8_t> w_q(codes.begin(), codes.end());  // integers in -127..127
  const std::string wn = conv + ".weight";
  const std::string wq = g_.raw_initializer(wn + ".quantized", dims, kInt8, raw(w_q));
  const std::string sw = g_.initializer(wn + ".scale", {k}, s_w);
  const std::string zw = g_.raw_initializer(wn + ".zero_point", {k}, kInt8,
                                            raw(std::vector<std::int8_t>(s_w.size(), 0)));
  const std::string wd =
      g_.node("DequantizeLinear", {wq, sw, zw}, wn + ".dequantized", {int_attr("axis", 0)});
  return {xd, wd};
}

}  // namespace stoke::interchange::detail
