// The op suite (op_suite_*_test.cpp) instantiated for the backends this
// binary has: a CPU backend of its own, the same run as a build without oneDNN
// runs it ("cpu_gemm": im2col + sgemm convolutions, the plain inference
// program), and the fake GPU (its ops issued on a fake stream, computed by an
// inner CPU backend). The CUDA instantiation is
// in the GPU binary (tests/gpu/op_suite_cuda_test.cpp).
#include "backend/cpu/cpu_backend.hpp"
#include "unit/fake_gpu_backend.hpp"
#include "unit/op_suite.hpp"

namespace stoke::testing {

INSTANTIATE_TEST_SUITE_P(
    Backends, OpSuite,
    ::testing::Values(BackendUnderTest{"cpu",
                                       [](std::string*) -> std::shared_ptr<Backend> {
                                         return make_cpu_backend(0);
                                       }},
                      BackendUnderTest{"cpu_gemm",
                                       [](std::string*) -> std::shared_ptr<Backend> {
                                         auto cpu = std::make_shared<cpu::CpuBackend>(0);
                                         cpu->use_gemm_convolutions(true);
                                         return cpu;
                                       }},
                      BackendUnderTest{"fake_gpu",
                                       [](std::string*) -> std::shared_ptr<Backend> {
                                         return std::make_shared<FakeGpuBackend>();
                                       }}),
    backend_test_name);

}  // namespace stoke::testing
