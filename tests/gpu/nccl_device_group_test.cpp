// NCCL device collectives of the CUDA backend (lib/backend/cuda/nccl_communicator.cpp)
// in a group of one rank: the device machine has one GPU. The id goes the way
// data-parallel training sends it (rank 0 makes it, the host communicator
// carries it); the allreduce runs on the compute stream after the ops queued
// before it, with no host synchronization in between.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
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

// Fault injection on one device: a group of two whose second rank never
// joins. The non-blocking init is polled under the deadline and aborted, so
// this rank gets a CommunicationError instead of waiting for ever.
TEST_F(NcclGroup, APeerThatNeverJoinsIsAbortedAtTheDeadline) {
  const auto id = gpu_->new_device_group_id();
  const auto start = std::chrono::steady_clock::now();
  try {
    auto group = gpu_->join_device_group(0, 2, id, 3.0);
    FAIL() << "a group of two formed with one rank";
  } catch (const CommunicationError& e) {
    EXPECT_NE(std::string(e.what()).find("did not complete on rank 0 within 3.0 s"),
              std::string::npos)
        << e.what();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 3.0);
  EXPECT_LT(waited, 30.0);
  // The backend stays usable after the abort.
  Tensor t(*gpu_, Shape{8});
  t.copy_from_host(ramp(8).data());
  gpu_->scale(t, 2.0f);
  EXPECT_EQ(t.to_vector()[1], 2.0f * ramp(8)[1]);
}

// A synchronize while a collective is queued goes through the group's
// bounded wait and returns once the stream is idle; the group then finalizes.
TEST_F(NcclGroup, SynchronizeWithAQueuedCollectiveWaitsThroughTheGroup) {
  auto group = join_one();
  const std::vector<float> input = ramp(4096);
  Tensor t(*gpu_, Shape{4096});
  t.copy_from_host(input.data());
  group->allreduce_sum(t);
  gpu_->synchronize();
  group.reset();  // finalize + destroy, bounded
  EXPECT_EQ(t.to_vector(), input);
}

}  // namespace
}  // namespace stoke::testing
