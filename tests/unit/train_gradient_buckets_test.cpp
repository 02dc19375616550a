// The data-parallel gradient buckets (lib/train/gradient_buckets.hpp) on an
// in-process peer, and Model::backward's progress reports they rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/nn.hpp"
#include "train/gradient_buckets.hpp"

namespace stoke {
namespace {

// Two ranks, the other one simulated: allreduce_sum adds the peer's values
// at the same offsets of the block. Records each call's (offset, size); the
// call numbered fail_at throws as a dead peer would.
class PeerCommunicator final : public Communicator {
 public:
  PeerCommunicator(const float* block, std::vector<float> peer, int fail_at = -1)
      : block_(block), peer_(std::move(peer)), fail_at_(fail_at) {}
  int rank() const noexcept override { return 0; }
  int world_size() const noexcept override { return 2; }
  std::string name() const override { return "peer"; }
  void allreduce_sum(std::span<float> data) override {
    const auto offset = static_cast<std::size_t>(data.data() - block_);
    {
      std::lock_guard lock(mutex_);
      if (static_cast<int>(calls_.size()) == fail_at_)
        throw CommunicationError("rank 1 stopped answering (test)", 0);
      calls_.push_back({offset, data.size()});
    }
    for (std::size_t i = 0; i < data.size(); ++i) data[i] += peer_[offset + i];
  }
  void broadcast(std::span<float>, int) override {}
  void broadcast_bytes(std::span<std::uint8_t>, int) override {}
  void barrier() override {}

  std::vector<std::pair<std::size_t, std::size_t>> calls() {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  const float* block_;
  std::vector<float> peer_;
  int fail_at_;
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, std::size_t>> calls_;
};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(GradientBuckets, EveryElementIsAveragedOnceInBucketsFromTheEnd) {
  std::vector<float> mine = random_floats(1000, 1);
  const std::vector<float> original = mine, peer = random_floats(1000, 2);
  PeerCommunicator comm(mine.data(), peer);
  detail::GradientBuckets buckets(comm, 256);  // 64 floats: 15 whole buckets and 40 at the start
  buckets.ready(mine, 900);                    // [936, 1000) is complete
  EXPECT_EQ(buckets.sent_early(), 1u);
  buckets.ready(mine, 500);  // down to [552, 616)
  EXPECT_EQ(buckets.sent_early(), 7u);
  buckets.finish(mine);
  EXPECT_EQ(buckets.sent(), 16u);
  for (std::size_t i = 0; i < mine.size(); ++i)
    ASSERT_EQ(mine[i], (original[i] + peer[i]) * 0.5f) << "element " << i;
  const auto calls = comm.calls();
  ASSERT_EQ(calls.size(), 16u);
  std::size_t end = 1000;
  for (const auto& [offset, size] : calls) {
    EXPECT_EQ(offset + size, end) << "buckets go from the block's end to its start, contiguous";
    end = offset;
  }
  EXPECT_EQ(end, 0u);
  EXPECT_EQ(calls.back().second, 40u);

  // The next step starts again from the end.
  buckets.ready(mine, 0);
  buckets.finish(mine);
  EXPECT_EQ(buckets.sent(), 32u);
  EXPECT_EQ(buckets.sent_early(), 23u);
}

TEST(GradientBuckets, AFailedCollectiveIsRethrownByFinishAndDropsTheRest) {
  std::vector<float> mine(640, 1.0f);
  PeerCommunicator comm(mine.data(), std::vector<float>(640, 1.0f), 2);
  detail::GradientBuckets buckets(comm, 256);
  buckets.ready(mine, 0);
  try {
    buckets.finish(mine);
    ADD_FAILURE() << "finish() returned after a collective failed";
  } catch (const CommunicationError& e) {
    EXPECT_NE(std::string(e.what()).find("stopped answering"), std::string::npos) << e.what();
  }
  EXPECT_EQ(comm.calls().size(), 2u) << "the buckets after the failed one are not sent";
}

// What the buckets rely on: once backward reports `first`, the gradients
// from there on hold their final values, and the ones below may not yet.
TEST(ModelBackwardProgress, ReportedGradientsAreAlreadyFinal) {
  nn::ModelSpec spec;
  spec.in_channels = 1;
  spec.height = spec.width = 8;
  spec.classes = 3;
  spec.stem_width = 4;
  spec.widths = {4, 8};
  spec.strides = {1, 2};
  auto model = nn::build_model(cpu_backend(), spec, 3);
  Tensor x(cpu_backend(), {2, 1, 8, 8});
  x.copy_from_host(random_floats(128, 4).data());
  Tensor dlogits(cpu_backend(), {2, 3});
  dlogits.copy_from_host(random_floats(6, 5).data());
  model->forward(x, true);
  model->backward(dlogits);
  const std::vector<float> expected = model->gradients().to_vector();

  // Every parameter's gradient NaN (the alignment gaps between them stay 0).
  std::vector<float> poisoned(expected.size(), 0.0f);
  const float* base = model->parameters().data<float>();
  for (const auto& p : model->named_parameters()) {
    const auto offset = static_cast<std::size_t>(p.tensor.data<float>() - base);
    std::fill_n(poisoned.begin() + static_cast<std::ptrdiff_t>(offset), p.tensor.numel(),
                std::numeric_limits<float>::quiet_NaN());
  }
  model->gradients().copy_from_host(poisoned.data());
  model->forward(x, true);
  std::vector<std::int64_t> reports;
  bool pending_seen = false;  // a report with gradients below it still to come
  model->backward(dlogits, [&](std::int64_t first) {
    reports.push_back(first);
    const float* g = model->gradients().data<float>();
    for (std::int64_t i = first; i < model->gradients().numel(); ++i)
      ASSERT_EQ(g[i], expected[static_cast<std::size_t>(i)]) << "gradient " << i;
    for (std::int64_t i = 0; i < first; ++i) pending_seen = pending_seen || std::isnan(g[i]);
  });
  ASSERT_GE(reports.size(), 3u) << "one report per layer with parameters";
  for (std::size_t i = 1; i < reports.size(); ++i) EXPECT_LT(reports[i], reports[i - 1]);
  EXPECT_EQ(reports.back(), 0);
  EXPECT_TRUE(pending_seen);
  EXPECT_EQ(model->gradients().to_vector(), expected);
}

}  // namespace
}  // namespace stoke
