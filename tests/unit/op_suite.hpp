// The op suite: one parameterized GoogleTest suite that runs every op of
// every backend against the naive reference (lib/backend/cpu/*_naive.cpp).
//
// The tests (op_suite_<family>_test.cpp) are compiled into the unit binary,
// instantiated there for `cpu` and the fake GPU (op_suite_backends_test.cpp),
// and into the GPU binary, instantiated for `cuda` (tests/gpu/op_suite_cuda_test.cpp),
// which skips with its reason where no device can run it.
//
// Inputs are seeded host vectors; the backend under test gets them through
// upload(), the reference gets them on the CPU backend. Every output of the
// backend under test is framed by guard values.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/naive.hpp"
#include "unit/op_test_util.hpp"

namespace stoke::testing {

// A backend the suite runs on: make() returns it, or null with the reason
// it cannot run here (the test is then skipped with that reason).
struct BackendUnderTest {
  std::string name;
  std::function<std::shared_ptr<Backend>(std::string* why_not)> make;
};

inline void PrintTo(const BackendUnderTest& backend, std::ostream* os) {
  *os << backend.name;
}

inline std::string backend_test_name(const ::testing::TestParamInfo<BackendUnderTest>& info) {
  return info.param.name;
}

// The fixture; its helpers are public so that each op family's case
// runners (free functions in op_suite_<family>_test.cpp) can use them.
class OpSuite : public ::testing::TestWithParam<BackendUnderTest> {
 public:
  void SetUp() override {
    std::string why;
    backend_ = GetParam().make(&why);
    if (!backend_) GTEST_SKIP() << GetParam().name << ": " << why;
  }

  // The backend under test and the reference's (host) backend.
  Backend& be() { return *backend_; }
  static Backend& ref() { return cpu_backend(); }

  // The same host data on the backend under test and on the reference's.
  struct Pair {
    Tensor dut, ref;
  };
  Pair both(const Shape& shape, const std::vector<float>& values) {
    return {upload(be(), shape, values), upload(ref(), shape, values)};
  }
  Pair both(const Shape& shape, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    return both(shape, random_values(static_cast<std::size_t>(shape_numel(shape)), seed, lo, hi));
  }
  Pair both_labels(std::int64_t n, int classes, std::uint32_t seed) {
    const auto v = random_labels(static_cast<std::size_t>(n), classes, seed);
    return {upload(be(), {n}, v), upload(ref(), {n}, v)};
  }
  // An output on the backend under test (framed by guards) and on the reference's.
  struct Out {
    Guarded dut;
    Tensor ref;
  };
  Out out(const Shape& shape) { return {Guarded(be(), shape), Tensor(ref(), shape)}; }

  // got (guarded, backend under test) against want (reference) within tol.
  static void expect_output(const Out& o, const Tolerance& tol, const std::string& what) {
    EXPECT_TRUE(close(o.dut.tensor, o.ref, tol, what));
    EXPECT_TRUE(o.dut.intact(what));
  }

 private:
  std::shared_ptr<Backend> backend_;
};

// Uniform integers from a fixed seed, for random shapes and parameters.
class ShapeRng {
 public:
  explicit ShapeRng(std::uint32_t seed) : rng_(seed) {}
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin() { return pick(0, 1) == 1; }

 private:
  std::mt19937 rng_;
};

}  // namespace stoke::testing
