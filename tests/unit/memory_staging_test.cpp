// Staging buffers: pinned while allowed, pageable with one warning otherwise,
// the reason kept for reports; every buffer zeroed (touched) once.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "stoke/log.hpp"
#include "stoke/memory.hpp"
#include "unit/fake_cuda_device.hpp"

namespace stoke::testing {
namespace {

// Collects warnings for the life of the test.
class WarningCapture {
 public:
  WarningCapture() {
    set_log_sink([this](LogLevel level, std::string_view message) {
      if (level == LogLevel::kWarn) warnings.emplace_back(message);
    });
  }
  ~WarningCapture() { set_log_sink({}); }
  std::vector<std::string> warnings;
};

bool all_zero(const StagingBuffer& b) {
  return std::all_of(b.data(), b.data() + b.size(), [](std::byte x) { return x == std::byte{0}; });
}

TEST(HostStaging, WithoutADevicePinningFallsBackToPageableWithOneWarning) {
  WarningCapture capture;
  Settings settings;  // pinning on by default
  HostStaging staging(settings, -1);
  StagingBuffer a = staging.allocate(100000);
  StagingBuffer b = staging.allocate(5000);
  EXPECT_FALSE(a.pinned());
  EXPECT_FALSE(b.pinned());
  EXPECT_TRUE(all_zero(a));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % kPoolAlignment, 0u);
  ASSERT_EQ(capture.warnings.size(), 1u) << "one warning, not one per buffer";
  EXPECT_NE(capture.warnings[0].find("pageable"), std::string::npos);
  const StagingReport r = staging.report();
  EXPECT_TRUE(r.fell_back);
  EXPECT_EQ(r.pageable_bytes, 105000u);
  EXPECT_EQ(r.buffers, 2u);
  EXPECT_NE(staging.report_text().find("fell back to pageable"), std::string::npos)
      << staging.report_text();
}

TEST(HostStaging, PinningOffIsPageableWithoutWarning) {
  WarningCapture capture;
  Settings settings;
  settings.host_pinned = false;
  auto device = std::make_shared<FakeCudaDevice>();
  HostStaging staging(settings, device);
  StagingBuffer a = staging.allocate(4096);
  EXPECT_FALSE(a.pinned());
  EXPECT_EQ(device->pinned_allocs, 0);
  EXPECT_TRUE(capture.warnings.empty());
  EXPECT_FALSE(staging.report().fell_back);
  EXPECT_NE(staging.report_text().find("pinning off"), std::string::npos);
}

TEST(HostStaging, PinnedUnderTheCapThenPageableOverItAndTheCapIsFreedAgain) {
  WarningCapture capture;
  Settings settings;
  settings.host_pinned_max = 1 << 20;
  auto device = std::make_shared<FakeCudaDevice>();
  HostStaging staging(settings, device);
  StagingBuffer a = staging.allocate(600 << 10);
  EXPECT_TRUE(a.pinned());
  EXPECT_TRUE(all_zero(a));
  StagingBuffer b = staging.allocate(600 << 10);  // would exceed 1 MiB
  EXPECT_FALSE(b.pinned());
  ASSERT_EQ(capture.warnings.size(), 1u);
  EXPECT_NE(capture.warnings[0].find("STOKE_HOST_PINNED_MAX"), std::string::npos)
      << capture.warnings[0];
  EXPECT_EQ(staging.report().pinned_bytes, 600u << 10);
  a.reset();
  EXPECT_EQ(device->pinned_live, 0u);
  EXPECT_EQ(staging.report().pinned_bytes, 0u);
  StagingBuffer c = staging.allocate(600 << 10);
  EXPECT_TRUE(c.pinned()) << "room under the cap again after a pinned buffer died";
  EXPECT_EQ(capture.warnings.size(), 1u);
}

TEST(HostStaging, RefusedPinningFallsBackAndSaysWhy) {
  WarningCapture capture;
  Settings settings;
  auto device = std::make_shared<FakeCudaDevice>();
  device->pinned_limit = 1000;
  HostStaging staging(settings, device);
  StagingBuffer a = staging.allocate(4096);
  EXPECT_FALSE(a.pinned());
  EXPECT_NE(staging.report().fallback_reason.find("cudaHostAlloc refused"), std::string::npos);
}

TEST(HostStaging, AFailingPinnedAllocationFallsBackInsteadOfThrowing) {
  WarningCapture capture;
  auto device = std::make_shared<FakeCudaDevice>();
  device->pinned_throws = true;
  HostStaging staging(Settings{}, device);
  StagingBuffer a = staging.allocate(4096);
  EXPECT_FALSE(a.pinned());
  EXPECT_NE(a.data(), nullptr);
  EXPECT_NE(staging.report().fallback_reason.find("status 999"), std::string::npos)
      << staging.report().fallback_reason;
  EXPECT_EQ(capture.warnings.size(), 1u);
}

TEST(HostStaging, BuffersOutliveTheirStagingAndMoveCleanly) {
  auto device = std::make_shared<FakeCudaDevice>();
  StagingBuffer kept;
  {
    HostStaging staging(Settings{}, device);
    kept = staging.allocate(8192);
  }
  EXPECT_TRUE(kept.pinned());
  StagingBuffer moved = std::move(kept);
  EXPECT_EQ(kept.data(), nullptr);
  EXPECT_EQ(moved.size(), 8192u);
  moved.reset();
  EXPECT_EQ(device->pinned_live, 0u);
}

}  // namespace
}  // namespace stoke::testing
