// Tensor handles and the backend registry.
#include "backend/cpu/cpu_backend.hpp"
#include "unit/op_test_util.hpp"

namespace stoke::testing {
namespace {

TEST(BackendRegistry, CpuIsAlwaysPresentAndDefaultWithoutGpu) {
  EXPECT_EQ(cpu_backend().name(), "cpu");
  EXPECT_EQ(find_backend("cpu"), &cpu_backend());
  EXPECT_EQ(find_backend("no-such-backend"), nullptr);
  const auto names = backend_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "cpu");
  if (names.size() == 1) {
    EXPECT_EQ(&default_backend(), &cpu_backend());
  }
  EXPECT_TRUE(cpu_backend().supports(Op::kConv2dForward, DType::kFloat32));
  EXPECT_FALSE(cpu_backend().supports(Op::kConv2dForward, DType::kFloat16));
}

TEST(BackendRegistry, RejectsDuplicateNames) {
  EXPECT_THROW(register_backend(std::make_unique<cpu::CpuBackend>()), InvalidArgument);
  EXPECT_THROW(register_backend(nullptr), InvalidArgument);
}

TEST(Tensor, CountsItsMemoryThroughTheBackend) {
  cpu::CpuBackend be;
  {
    Tensor t(be, {2, 3, 4, 5});
    EXPECT_EQ(t.numel(), 120);
    EXPECT_EQ(t.bytes(), 480u);
    EXPECT_EQ(be.memory_stats().in_use_bytes, 480u);
    Tensor copy = t;  // shares storage
    EXPECT_EQ(be.memory_stats().allocations, 1u);
  }
  EXPECT_EQ(be.memory_stats().in_use_bytes, 0u);
  EXPECT_EQ(be.memory_stats().peak_bytes, 480u);
}

TEST(Tensor, ViewsAndReshapesShareStorage) {
  Backend& be = cpu_backend();
  Tensor t(be, {10});
  const std::vector<float> v = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  t.copy_from_host(v.data());
  Tensor mid = t.view(4, {2, 3});
  EXPECT_EQ(mid.to_vector(), (std::vector<float>{4, 5, 6, 7, 8, 9}));
  be.fill(mid, -1.0f);
  EXPECT_EQ(t.to_vector()[3], 3.0f);
  EXPECT_EQ(t.to_vector()[4], -1.0f);
  EXPECT_EQ(t.reshaped({2, 5}).dim(-1), 5);
  EXPECT_THROW(t.reshaped({3, 3}), InvalidArgument);
  EXPECT_THROW(t.view(8, {3}), InvalidArgument);
  EXPECT_THROW(t.dim(1), InvalidArgument);
  EXPECT_THROW(t.data<std::int32_t>(), InvalidArgument);
  EXPECT_EQ(shape_to_string({64, 3, 28, 28}), "(64, 3, 28, 28)");
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
}

// The op list names every entry point once, in order.
TEST(BackendOps, EveryOpHasItsEntryPointsName) {
  EXPECT_STREQ(to_string(Op::kConv2dForward), "conv2d_forward");
  EXPECT_STREQ(to_string(Op::kSoftmaxCrossEntropyBackward), "softmax_cross_entropy_backward");
  EXPECT_STREQ(to_string(Op::kAdamUpdate), "adam_update");
#define STOKE_COUNT_OP(kind, name, params, args) +1
  constexpr int kOps = 0 STOKE_OPS(STOKE_COUNT_OP);
#undef STOKE_COUNT_OP
  EXPECT_EQ(static_cast<int>(Op::kAdamUpdate) + 1, kOps);
  EXPECT_STREQ(to_string(Op::kAllFinite), "all_finite");
}

TEST(Tensor, OpsRejectWrongShapesWithTheirNames) {
  Backend& be = cpu_backend();
  Tensor x(be, {4}), y(be, {5});
  try {
    be.relu_forward(x, y);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("relu_forward"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(5)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke::testing
