// The test toolkit itself: guards see writes outside an output, close()
// sees one wrong element, and the tolerance table grows with the reduction.
#include "unit/op_test_util.hpp"

namespace stoke::testing {
namespace {

TEST(OpTestToolkit, GuardsSeeWritesJustOutsideTheOutput) {
  Backend& be = cpu_backend();
  Guarded g(be, {3, 5});
  EXPECT_TRUE(g.intact("fresh"));
  be.fill(g.tensor, 1.0f);
  EXPECT_TRUE(g.intact("filled inside"));
  g.tensor.data<float>()[15] = 2.0f;  // one past the end
  EXPECT_FALSE(g.intact("one past the end"));
  Guarded before(be, {4});
  before.tensor.data<float>()[-1] = 0.0f;  // one before the start (inside the guard block)
  EXPECT_FALSE(before.intact("one before the start"));
}

TEST(OpTestToolkit, CloseSeesOneWrongElementAndNaN) {
  const std::vector<float> want = {1.0f, -2.0f, 3.0f, 0.5f};
  std::vector<float> got = want;
  const Tolerance tol = tolerance(Accuracy::kReduction, 100);
  EXPECT_TRUE(close(got, want, tol, "equal"));
  got[2] = 3.0f * (1.0f + 2 * static_cast<float>(tol.max_error));
  EXPECT_FALSE(close(got, want, tol, "one element off by twice the bound"));
  got[2] = std::nanf("");
  EXPECT_FALSE(close(got, want, tol, "NaN"));
  EXPECT_FALSE(close(std::vector<float>{1.0f}, want, tol, "size"));
}

TEST(OpTestToolkit, ToleranceTableScalesWithEpsilonAndReductionLength) {
  EXPECT_EQ(tolerance(Accuracy::kExact).max_error, 0.0);
  const double t10 = tolerance(Accuracy::kReduction, 10).max_error;
  const double t1000 = tolerance(Accuracy::kReduction, 1000).max_error;
  EXPECT_NEAR(t1000 / t10, std::sqrt(1001.0 / 11.0), 1e-9);
  EXPECT_EQ(tolerance(Accuracy::kElementwise, 10).max_error,
            tolerance(Accuracy::kElementwise, 1000).max_error);
  EXPECT_GT(tolerance(Accuracy::kElementwise, 1, DType::kBFloat16).max_error,
            tolerance(Accuracy::kElementwise, 1, DType::kFloat32).max_error);
  for (const ToleranceRule& rule : kToleranceTable)
    EXPECT_NE(std::string(rule.reason), "") << "every rule says why";
}

}  // namespace
}  // namespace stoke::testing
