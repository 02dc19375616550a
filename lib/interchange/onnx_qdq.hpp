// Internal: the QDQ int8 form of the classifier export
// (OnnxExportOptions::int8_input_ranges). Installed on an OnnxGraph, it
// writes each convolution as stoke's int8 inference computes it
// (lib/backend/cpu/conv2d_int8.hpp has the rules, and this uses them):
//   x -> QuantizeLinear(s_x, 0) -> DequantizeLinear(s_x, 0) -> Conv
//   w_q (int8 initializer) -> DequantizeLinear(s_w, 0, axis 0) -> Conv
// with s_x from the calibrated range (uint8 over [0, max] when the range has
// no negatives, else int8 over [-m, m], m = max |range|) and s_w per output
// channel; the bias stays fp32 (stoke adds it in fp32 too). A block's
// identity shortcut adds the dequantized codes of its first convolution's
// input, as stoke's int8 program adds them.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "interchange/onnx_graph.hpp"

namespace stoke::interchange::detail {

class STOKE_INTERNAL QdqConvolutions {
 public:
  // Sets g.quantize_conv when `ranges` is non-empty (else leaves g as it is):
  // the j-th convolution the graph writes takes ranges[j] (the program's
  // order, which the graph's walk follows: a block's body before its shortcut).
  QdqConvolutions(OnnxGraph& g, std::vector<std::pair<float, float>> ranges);
  // InvalidArgument unless every range went to a convolution.
  void check_all_used() const;

 private:
  std::pair<std::string, std::string> quantize(const std::string& conv, const std::string& x,
                                               const std::vector<std::int64_t>& dims,
                                               const std::vector<float>& w);

  OnnxGraph& g_;
  std::vector<std::pair<float, float>> ranges_;
  std::size_t used_ = 0;
};

}  // namespace stoke::interchange::detail
