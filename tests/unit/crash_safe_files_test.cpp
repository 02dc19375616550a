// Crash-safe files: a writer process killed at random moments while it saves
// checkpoints or builds a cache file leaves the old file or the new one,
// never one that loads wrongly.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "stoke/stoke.hpp"

extern char** environ;

namespace stoke {
namespace {

namespace fs = std::filesystem;

class CrashSafeFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoke_crash_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Starts the writer, lets it run for `run`, kills it with SIGKILL.
  static void run_and_kill(std::vector<std::string> args, std::chrono::microseconds run) {
    std::vector<char*> argv;
    std::string program = STOKE_CRASH_WRITER;
    argv.push_back(program.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, program.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    // The kill point is what is random here; nothing waits for an effect.
    std::this_thread::sleep_for(run);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited on its own";
  }

  fs::path dir_;
};

nn::ModelSpec small_spec() {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kPlainCnn;
  spec.widths = {8, 16};
  return spec;
}

TEST_F(CrashSafeFiles, KilledCheckpointWriterLeavesTheOldOrTheNewCheckpoint) {
  const auto path = (dir_ / "model.ckpt").string();
  auto a = nn::build_model(cpu_backend(), small_spec(), 1);
  auto b = nn::build_model(cpu_backend(), small_spec(), 2);
  nn::save_checkpoint(path, *a, nullptr);
  const auto wa = a->parameters().to_vector(), wb = b->parameters().to_vector();
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> micros(2000, 60000);
  for (int round = 0; round < 12; ++round) {
    run_and_kill({"checkpoint", path}, std::chrono::microseconds(micros(rng)));
    auto loaded = nn::build_model(cpu_backend(), small_spec(), 99);
    ASSERT_NO_THROW(nn::load_checkpoint(path, *loaded)) << "round " << round;
    const auto w = loaded->parameters().to_vector();
    EXPECT_TRUE(w == wa || w == wb) << "round " << round << ": neither checkpoint";
  }
  // Leftover temporary files never shadow the checkpoint.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_TRUE(entry.path().filename() == "model.ckpt" ||
                entry.path().filename().string().find(".tmp.") != std::string::npos)
        << entry.path();
  }
}

TEST_F(CrashSafeFiles, KilledCacheBuilderNeverLeavesACacheThatReadsWrongly) {
  SyntheticOptions synth;
  synth.width = 64;
  synth.height = 48;
  const auto data_dir = write_synthetic_dataset(dir_ / "data", 12, synth);
  const auto data = Dataset::from_folder(data_dir);
  const auto cache = (dir_ / "samples.cache").string();
  LoaderOptions options;
  options.preprocess.width = 32;
  options.preprocess.height = 24;
  options.batch_size = 4;
  options.shuffle = false;
  options.cache = CacheSpec{};
  // The truth: the same batches without any cache.
  std::vector<std::byte> expected(12 * 3 * 32 * 24 * 4), got(expected.size());
  std::vector<std::int32_t> labels(4);
  {
    Loader plain(data, options);
    for (std::size_t b = 0; b < 3; ++b) {
      plain.fill_batch(0, b, std::span(expected).subspan(b * 4 * 3 * 32 * 24 * 4), labels);
    }
  }
  options.cache = CacheSpec{CacheSpec::Kind::kFile, 0, cache};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> micros(2000, 80000);
  for (int round = 0; round < 8; ++round) {
    run_and_kill({"cache", data_dir.string(), cache}, std::chrono::microseconds(micros(rng)));
    Loader loader(data, options);  // finds a complete cache, or rebuilds it
    for (std::size_t b = 0; b < 3; ++b) {
      loader.fill_batch(0, b, std::span(got).subspan(b * 4 * 3 * 32 * 24 * 4), labels);
    }
    EXPECT_EQ(got, expected) << "round " << round << ": " << loader.stats().cache_note;
  }
}

}  // namespace
}  // namespace stoke
