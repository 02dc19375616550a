// Every runtime-compiled kernel compiles with NVRTC for every supported
// architecture. NVRTC needs no GPU, so this runs in CI: the cheapest proof that
// a JIT kernel is valid CUDA for each card stoke supports.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "backend/cuda/jit.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

constexpr int kArchitectures[] = {75, 80, 86, 89, 90};

bool contains(const std::vector<char>& bytes, const std::string& text) {
  return std::search(bytes.begin(), bytes.end(), text.begin(), text.end()) != bytes.end();
}

TEST(JitCompile, EveryKernelSourceCompilesForEverySupportedArchitecture) {
  ASSERT_FALSE(kernel_sources().empty());
  for (const auto& source : kernel_sources()) {
    ASSERT_FALSE(source.kernels.empty()) << source.name << " defines no stoke_ kernel";
    for (int arch : kArchitectures) {
      const auto cubin = compile_to_cubin(source, arch);
      ASSERT_GT(cubin.size(), 4u) << source.name << " sm_" << arch;
      EXPECT_TRUE(cubin[0] == 0x7f && cubin[1] == 'E' && cubin[2] == 'L' && cubin[3] == 'F')
          << source.name << " sm_" << arch << " is not an ELF cubin";
      for (const auto& kernel : source.kernels) {
        EXPECT_TRUE(contains(cubin, kernel))
            << kernel << " missing from the sm_" << arch << " cubin";
      }
    }
  }
}

TEST(JitCompile, EmbeddedSourcesListTheirKernels) {
  std::vector<std::string> all;
  for (const auto& s : kernel_sources()) all.insert(all.end(), s.kernels.begin(), s.kernels.end());
  for (const char* expected : {"stoke_relu_forward",
                               "stoke_relu_backward",
                               "stoke_add",
                               "stoke_axpy",
                               "stoke_u8_hwc_to_f32_chw",
                               "stoke_sgd_update",
                               "stoke_adam_update",
                               "stoke_max_pool_forward",
                               "stoke_max_pool_backward",
                               "stoke_avg_pool_forward",
                               "stoke_avg_pool_backward",
                               "stoke_global_avg_pool_forward",
                               "stoke_global_avg_pool_backward",
                               "stoke_softmax_ce_rows",
                               "stoke_softmax_ce_reduce",
                               "stoke_softmax_ce_backward",
                               "stoke_dropout_forward",
                               "stoke_add_bias_rows",
                               "stoke_sum_rows",
                               "stoke_fill",
                               "stoke_mul",
                               "stoke_all_finite"}) {
    EXPECT_NE(std::find(all.begin(), all.end(), expected), all.end()) << expected;
  }
}

TEST(JitCompile, CompileErrorNamesTheFileArchitectureAndLog) {
  const KernelSource broken{
      "broken", "extern \"C\" __global__ void stoke_broken() { int x = ; }", {"stoke_broken"}};
  try {
    compile_to_cubin(broken, 90);
    FAIL() << "no error";
  } catch (const GpuLibraryError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kNvrtc);
    EXPECT_NE(m.find("broken.cu"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_90"), std::string::npos) << m;
    EXPECT_NE(m.find("expected an expression"), std::string::npos) << m;
  }
}

class JitCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stoke_jit_cache_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(JitCacheTest, SecondRunLoadsFromDiskWithoutCompiling) {
  JitCache cache(dir_);
  const auto& source = kernel_sources().front();
  bool compiled = false;
  const auto first = cache.get_or_compile(source, 86, &compiled);
  EXPECT_TRUE(compiled);
  const auto second = JitCache(dir_).get_or_compile(source, 86, &compiled);
  EXPECT_FALSE(compiled);
  EXPECT_EQ(first, second);
  // Another architecture is another entry.
  EXPECT_NE(cache.key(source, 86), cache.key(source, 90));
  KernelSource edited = source;
  edited.text += "\n// edited\n";
  EXPECT_NE(cache.key(source, 86), cache.key(edited, 86));
}

TEST_F(JitCacheTest, TruncatedOrCorruptEntryIsRecompiledNeverLoaded) {
  JitCache cache(dir_);
  const auto& source = kernel_sources().front();
  const auto good = cache.get_or_compile(source, 80);
  const auto key = cache.key(source, 80);
  std::filesystem::path file;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) file = entry.path();
  ASSERT_FALSE(file.empty());

  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  EXPECT_FALSE(cache.load(key).has_value());
  bool compiled = false;
  EXPECT_EQ(cache.get_or_compile(source, 80, &compiled), good);
  EXPECT_TRUE(compiled);

  {  // Flip one payload byte: the checksum catches it.
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-10, std::ios::end);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  EXPECT_FALSE(cache.load(key).has_value());
}

// Two backends (or a backend and the prefetcher's normalize kernel) may
// store the same kernel from two threads of one process at once: each write
// goes to a temporary file of its own, so both renames succeed and the entry
// is whole. (With the temporary file named by the process id alone the
// threads wrote into one file, and one rename found it already gone.)
TEST_F(JitCacheTest, ThreadsStoringTheSameEntryAtOnceEachSucceed) {
  JitCache cache(dir_);
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<char> payload(256 << 10);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r)
        if (!cache.store(42, payload)) ++failed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0) << "stores that lost their temporary file to another thread";
  const auto loaded = cache.load(42);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, payload);
  for (const auto& entry : std::filesystem::directory_iterator(dir_))
    EXPECT_EQ(entry.path().extension(), ".cubin") << "left behind: " << entry.path();
}

TEST_F(JitCacheTest, UnwritableDirectoryIsNotAnError) {
  JitCache cache("/proc/stoke-cannot-write-here");
  bool compiled = false;
  EXPECT_NO_THROW(cache.get_or_compile(kernel_sources().front(), 75, &compiled));
  EXPECT_TRUE(compiled);
}

}  // namespace
}  // namespace stoke::cuda
