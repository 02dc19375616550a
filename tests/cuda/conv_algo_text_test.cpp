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
  a.deterministic = false;
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
  b.deterministic = true;
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
    EXPECT_EQ(out[i].deterministic, in[i].deterministic);
  }
}

// Version 1 text (no deterministic field) still loads, its choices not known
// to be deterministic.
TEST(ConvAlgoText, VersionOneTextParsesAsNotKnownDeterministic) {
  std::string why;
  const auto out = parse_conv_algos(
      "stoke-conv-algos 1 cudnn=7\nforward\t1\tIMPLICIT_PRECOMP_GEMM\t64\t3\t1\t0.5\tkey fp32\n", 7,
      &why);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].workspace_bytes, 64u);
  EXPECT_FALSE(out[0].deterministic);
  EXPECT_EQ(out[0].key, "key fp32");
}

// A loaded choice obeys the loading backend's options as its own choice
// would: nothing over its workspace limit, and with `deterministic` nothing
// cuDNN did not report deterministic. The rest load; the dropped ones are
// named and chosen again by the backend.
TEST(ConvAlgoText, LoadingHonoursTheWorkspaceLimitAndDeterminism) {
  const std::string text =
      format_conv_algos(sample(), 91900);  // a: 123456 B, not det.; b: 0 B, det.
  std::string why;
  ConvAlgoLimits limits;
  limits.workspace_limit = 1 << 20;
  EXPECT_EQ(conv_algos_to_load(text, 91900, limits, &why).size(), 2u) << why;
  EXPECT_TRUE(why.empty()) << why;

  limits.workspace_limit = 1000;
  auto kept = conv_algos_to_load(text, 91900, limits, &why);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].pass, "backward_filter");
  EXPECT_NE(why.find("123456"), std::string::npos) << why;
  EXPECT_NE(why.find("workspace limit"), std::string::npos) << why;

  limits.workspace_limit = 1 << 20;
  limits.deterministic = true;
  kept = conv_algos_to_load(text, 91900, limits, &why);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(kept[0].deterministic);
  EXPECT_NE(why.find("not deterministic"), std::string::npos) << why;
  EXPECT_NE(why.find("forward (64, 3, 224, 224)"), std::string::npos) << why;
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
