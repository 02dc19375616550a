// The cuDNN algorithm cache's text form (runs without a GPU).
#include "backend/cuda/conv_algo_text.hpp"

#include <gtest/gtest.h>

#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

std::vector<ConvAlgoChoice> sample() {
  ConvAlgoChoice a;
  a.pass = "forward";
  a.key = "(64, 3, 224, 224) w(32, 3, 3, 3) s1,1 p1,1 d1,1 g1 tf32";
  a.algorithm = 1;
  a.algorithm_name = "IMPLICIT_PRECOMP_GEMM";
  a.workspace_bytes = 123456;
  a.math_type = 1;
  a.benchmarked = true;
  a.tensor_ops = true;
  a.time_ms = 0.123456789f;  // needs 9 digits to round-trip
  ConvAlgoChoice b = a;
  b.pass = "backward_filter";
  b.key = "(8, 16, 20, 20) w(32, 16, 3, 3) s1,1 p1,1 d1,1 g1 fp32";
  b.algorithm = 0;
  b.algorithm_name = "ALGO_0";
  b.workspace_bytes = 0;
  b.math_type = 3;
  b.benchmarked = false;
  b.tensor_ops = false;
  b.time_ms = -1.0f;
  return {a, b};
}

TEST(ConvAlgoText, RoundTripsEveryField) {
  const auto in = sample();
  std::string why;
  const auto out = parse_conv_algos(format_conv_algos(in, 91900), 91900, &why);
  EXPECT_TRUE(why.empty()) << why;
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].pass, in[i].pass);
    EXPECT_EQ(out[i].key, in[i].key);
    EXPECT_EQ(out[i].algorithm, in[i].algorithm);
    EXPECT_EQ(out[i].algorithm_name, in[i].algorithm_name);
    EXPECT_EQ(out[i].workspace_bytes, in[i].workspace_bytes);
    EXPECT_EQ(out[i].math_type, in[i].math_type);
    EXPECT_EQ(out[i].benchmarked, in[i].benchmarked);
    EXPECT_EQ(out[i].tensor_ops, in[i].tensor_ops);
    EXPECT_EQ(out[i].time_ms, in[i].time_ms);
  }
}

TEST(ConvAlgoText, AnotherCudnnVersionIsIgnoredWithTheReason) {
  std::string why;
  EXPECT_TRUE(parse_conv_algos(format_conv_algos(sample(), 90100), 91900, &why).empty());
  EXPECT_NE(why.find("cudnn=90100"), std::string::npos) << why;
}

TEST(ConvAlgoText, MalformedTextNamesTheLine) {
  std::string why;
  EXPECT_THROW(parse_conv_algos("", 1, &why), InvalidArgument);
  EXPECT_THROW(parse_conv_algos("something else\n", 1, &why), InvalidArgument);
  try {
    parse_conv_algos("stoke-conv-algos 1 cudnn=1\nforward\t1\tX\tnot-a-number\t0\t0\t0\tkey\n", 1,
                     &why);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      parse_conv_algos("stoke-conv-algos 1 cudnn=1\nsideways\t1\tX\t0\t0\t0\t0\tkey\n", 1, &why),
      InvalidArgument);
}

}  // namespace
}  // namespace stoke::cuda
