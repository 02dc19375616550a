// NCCL device collectives of the CUDA backend (lib/backend/cuda/nccl_communicator.cpp)
// in a group of one rank: the device machine has one GPU. The id goes the way
// data-parallel training sends it (rank 0 makes it, the host communicator
// carries it); the allreduce runs on the compute stream after the ops queued
// before it, with no host synchronization in between.
#include <gtest/gtest.h>

#include <vector>

#include "distributed/group_id.hpp"
#include "gpu/gpu_fixture.hpp"
#include "stoke/backend.hpp"
#include "stoke/cuda.hpp"
#include "stoke/distributed.hpp"

namespace stoke::testing {
namespace {

class NcclGroup : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    gpu_ = create_cuda_backend(0, Settings{}, CudaBackendOptions{});
    const std::string why = gpu_->device_collectives_unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
  }

  std::unique_ptr<DeviceCommunicator> join_one() {
    auto host = make_communicator(DistributedOptions{});
    const auto id = detail::share_group_id(
        *host, [this] { return gpu_->new_device_group_id(); }, kDeviceGroupIdBytes);
    return gpu_->join_device_group(0, 1, id);
  }

  std::unique_ptr<GpuBackend> gpu_;
};

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.25f - 100.0f;
  return v;
}

TEST_F(NcclGroup, OneRankAllreduceReturnsItsInputInStreamOrder) {
  auto group = join_one();
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->world_size(), 1);
  EXPECT_EQ(group->name().rfind("nccl ", 0), 0u) << group->name();
  const std::vector<float> input = ramp(100003);
  Tensor t(*gpu_, Shape{static_cast<std::int64_t>(input.size())});
  t.copy_from_host(input.data());
  gpu_->scale(t, 2.0f);     // queued before the collective: it must see the doubled values
  group->allreduce_sum(t);  // no synchronize in between
  group->allreduce_mean(t);
  const std::vector<float> out = t.to_vector();
  ASSERT_EQ(out.size(), input.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], 2.0f * input[i]) << "element " << i;
  }
}

TEST_F(NcclGroup, RefusesBadRanksIdsAndTensorsByName) {
  const auto id = gpu_->new_device_group_id();
  ASSERT_EQ(id.size(), kDeviceGroupIdBytes);
  EXPECT_THROW(gpu_->join_device_group(1, 1, id), InvalidArgument);
  EXPECT_THROW(gpu_->join_device_group(0, 1, std::span<const std::uint8_t>(id.data(), 5)),
               InvalidArgument);
  auto group = gpu_->join_device_group(0, 1, id);
  Tensor host(cpu_backend(), Shape{4});
  EXPECT_THROW(group->allreduce_sum(host), InvalidArgument);
  Tensor u8(*gpu_, Shape{4}, DType::kUInt8);
  EXPECT_THROW(group->allreduce_mean(u8), InvalidArgument);
}

}  // namespace
}  // namespace stoke::testing
