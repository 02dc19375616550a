#include "stoke/config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "stoke/error.hpp"

namespace stoke {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

Config load_env(Env env, int physical_cores = 8) {
  ConfigLoadOptions options;
  options.environment = std::move(env);
  options.physical_cores = physical_cores;
  return Config::load(options);
}

// The message of the ConfigError thrown by loading `env`, or "" if none.
std::string load_error(Env env) {
  try {
    load_env(std::move(env));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsMatchTheDesignTable) {
  const auto c = load_env({});
  const auto& s = c.settings();
  EXPECT_EQ(s.gpu_device.kind, DeviceRequest::Kind::kAuto);
  EXPECT_EQ(s.gpu_mem_percent, 60.0);
  EXPECT_FALSE(s.gpu_mem_max.has_value());
  EXPECT_TRUE(s.gpu_streams);
  EXPECT_EQ(s.gpu_graph, Toggle::kAuto);
  EXPECT_EQ(s.gpu_jit, Toggle::kAuto);
  EXPECT_TRUE(s.host_pinned);
  EXPECT_EQ(s.host_pinned_max, 512ull << 20);
  EXPECT_FALSE(s.cpu_threads.has_value());
  EXPECT_TRUE(s.cpu_simd.automatic);
  EXPECT_EQ(s.prefetch_depth, 2);
  EXPECT_EQ(s.cache.kind, CacheSpec::Kind::kOff);
  EXPECT_EQ(s.log_level, LogLevel::kWarn);
  EXPECT_EQ(s.max_image_pixels, std::uint64_t{300000000});
  EXPECT_EQ(s.precision, Precision::kFp32);
  for (const auto& k : c.knobs()) EXPECT_EQ(k.source, ConfigSource::kDefault) << k.name;
  EXPECT_EQ(c.knobs().size(), 15u);
}

TEST(Config, EnvironmentValuesParseAndRecordTheirSource) {
  const auto c = load_env({{"STOKE_GPU_DEVICE", "1,0"},
                           {"STOKE_GPU_MEM_PERCENT", "75.5"},
                           {"STOKE_GPU_MEM_MAX", "12G"},
                           {"STOKE_GPU_STREAMS", "off"},
                           {"STOKE_GPU_GRAPH", "on"},
                           {"STOKE_GPU_JIT", "false"},
                           {"STOKE_HOST_PINNED", "0"},
                           {"STOKE_HOST_PINNED_MAX", "1GiB"},
                           {"STOKE_CPU_THREADS", "3"},
                           {"STOKE_CPU_SIMD", "scalar"},
                           {"STOKE_PREFETCH_DEPTH", "4"},
                           {"STOKE_CACHE", "ram:2G"},
                           {"STOKE_LOG_LEVEL", "error"},
                           {"STOKE_MAX_IMAGE_PIXELS", "none"},
                           {"STOKE_PRECISION", "auto"},
                           {"PATH", "/usr/bin"}});
  const auto& s = c.settings();
  EXPECT_EQ(s.gpu_device.kind, DeviceRequest::Kind::kList);
  EXPECT_EQ(s.gpu_device.indices, (std::vector<int>{1, 0}));
  EXPECT_DOUBLE_EQ(s.gpu_mem_percent, 75.5);
  EXPECT_EQ(*s.gpu_mem_max, 12ull << 30);
  EXPECT_FALSE(s.gpu_streams);
  EXPECT_EQ(s.gpu_graph, Toggle::kOn);
  EXPECT_EQ(s.gpu_jit, Toggle::kOff);
  EXPECT_FALSE(s.host_pinned);
  EXPECT_EQ(s.host_pinned_max, 1ull << 30);
  EXPECT_EQ(*s.cpu_threads, 3);
  EXPECT_FALSE(s.cpu_simd.automatic);
  EXPECT_EQ(s.cpu_simd.level, SimdLevel::kScalar);
  EXPECT_EQ(s.prefetch_depth, 4);
  EXPECT_EQ(s.cache.kind, CacheSpec::Kind::kRam);
  EXPECT_EQ(s.cache.ram_budget, 2ull << 30);
  EXPECT_EQ(s.log_level, LogLevel::kError);
  EXPECT_FALSE(s.max_image_pixels.has_value());
  EXPECT_EQ(s.precision, Precision::kAuto);
  for (const auto& k : c.knobs()) EXPECT_EQ(k.source, ConfigSource::kEnvironment) << k.name;
  EXPECT_EQ(c.knob("STOKE_GPU_MEM_MAX").value, "12G");
  EXPECT_EQ(c.knob("gpu_device").value, "1,0");
  set_log_level(LogLevel::kWarn);
}

struct BadValueCase {
  const char* name;
  const char* value;
  const char* accepted_fragment;
};

class ConfigBadValue : public ::testing::TestWithParam<BadValueCase> {};

TEST_P(ConfigBadValue, ThrowsNamingVariableValueAndAcceptedValues) {
  const auto& p = GetParam();
  const std::string message = load_error({{p.name, p.value}});
  ASSERT_FALSE(message.empty()) << p.name << "=" << p.value << " was accepted";
  EXPECT_NE(message.find(std::string(p.name) + "=" + p.value), std::string::npos) << message;
  EXPECT_NE(message.find("accepted"), std::string::npos) << message;
  EXPECT_NE(message.find(p.accepted_fragment), std::string::npos) << message;
  EXPECT_NE(message.find("environment"), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(EveryKnob, ConfigBadValue,
                         ::testing::Values(BadValueCase{"STOKE_GPU_MEM_PERCENT", "150", "(0, 100]"},
                                           BadValueCase{"STOKE_GPU_MEM_PERCENT", "abc", "(0, 100]"},
                                           BadValueCase{"STOKE_GPU_MEM_PERCENT", "0", "(0, 100]"},
                                           BadValueCase{"STOKE_GPU_MEM_PERCENT", "-5", "(0, 100]"},
                                           BadValueCase{"STOKE_GPU_MEM_MAX", "12Q", "8G"},
                                           BadValueCase{"STOKE_GPU_MEM_MAX", "0", "8G"},
                                           BadValueCase{"STOKE_GPU_MEM_MAX", "G", "8G"},
                                           BadValueCase{"STOKE_GPU_STREAMS", "maybe", "on or off"},
                                           BadValueCase{"STOKE_GPU_GRAPH", "sometimes",
                                                        "auto, on or off"},
                                           BadValueCase{"STOKE_GPU_JIT", "2", "auto, on or off"},
                                           BadValueCase{"STOKE_HOST_PINNED", "", "on or off"},
                                           BadValueCase{"STOKE_HOST_PINNED_MAX", "12Q", "512M"},
                                           BadValueCase{"STOKE_CPU_THREADS", "0", "[1, 4096]"},
                                           BadValueCase{"STOKE_CPU_THREADS", "-2", "[1, 4096]"},
                                           BadValueCase{"STOKE_CPU_THREADS", "four", "[1, 4096]"},
                                           BadValueCase{"STOKE_CPU_THREADS", "3.5", "[1, 4096]"},
                                           BadValueCase{"STOKE_CPU_SIMD", "neon", "avx512"},
                                           BadValueCase{"STOKE_PREFETCH_DEPTH", "0", "[1, 64]"},
                                           BadValueCase{"STOKE_PREFETCH_DEPTH", "100", "[1, 64]"},
                                           BadValueCase{"STOKE_CACHE", "disk", "file:PATH"},
                                           BadValueCase{"STOKE_CACHE", "file:", "file:PATH"},
                                           BadValueCase{"STOKE_CACHE", "ram:lots", "ram:SIZE"},
                                           BadValueCase{"STOKE_LOG_LEVEL", "verbose", "debug"},
                                           BadValueCase{"STOKE_GPU_DEVICE", "gpu0", "auto, cpu"},
                                           BadValueCase{"STOKE_GPU_DEVICE", "0,0", "distinct"},
                                           BadValueCase{"STOKE_GPU_DEVICE", "1,,2", "comma list"}));

// Fuzz regression (tests/fuzz/crashes/config_file): numbers beyond a double,
// either way, are a ConfigError, not an escaping std::out_of_range.
TEST(Config, NumbersBeyondADoubleAreConfigErrors) {
  EXPECT_NE(load_error({{"STOKE_GPU_MEM_PERCENT", "1" + std::string(400, '0')}}), "");
  EXPECT_NE(load_error({{"STOKE_GPU_MEM_MAX", "0." + std::string(400, '0') + "1G"}}), "");
}

TEST(Config, SizesAcceptBinarySuffixes) {
  EXPECT_EQ(parse_size("4096", "x"), 4096u);
  EXPECT_EQ(parse_size("512M", "x"), 512ull << 20);
  EXPECT_EQ(parse_size("512mb", "x"), 512ull << 20);
  EXPECT_EQ(parse_size("1.5G", "x"), 3ull << 29);
  EXPECT_EQ(parse_size("2TiB", "x"), 2ull << 40);
  EXPECT_EQ(parse_size(" 64k ", "x"), 64ull << 10);
  EXPECT_THROW(parse_size("12Q", "x"), ConfigError);
  EXPECT_THROW(parse_size("1e9", "x"), ConfigError);
  EXPECT_THROW(parse_size("", "x"), ConfigError);
  EXPECT_THROW(parse_size("M", "x"), ConfigError);
}

TEST(Config, UnknownVariableWarnsWithNearestName) {
  const auto c = load_env({{"STOKE_GPU_MEM_PERCNT", "80"}, {"STOKE_TOTALLY_DIFFERENT_THING", "1"}});
  ASSERT_EQ(c.warnings().size(), 2u);
  EXPECT_NE(c.warnings()[0].find("STOKE_GPU_MEM_PERCNT"), std::string::npos);
  EXPECT_NE(c.warnings()[0].find("did you mean STOKE_GPU_MEM_PERCENT?"), std::string::npos)
      << c.warnings()[0];
  EXPECT_EQ(c.warnings()[1].find("did you mean"), std::string::npos) << c.warnings()[1];
  // The typo did not take effect, and the report says so.
  EXPECT_EQ(c.settings().gpu_mem_percent, 60.0);
  EXPECT_NE(c.report().find("did you mean STOKE_GPU_MEM_PERCENT?"), std::string::npos);
}

// Near misses at the ends of the length range still get their suggestion; a
// name far longer than any knob gets none (and costs no distance computation).
TEST(Config, SuggestionsDependOnlyOnNearness) {
  const auto c = load_env({{"STOKE_CACHEE", "off"},
                           {"STOKE_HOST_PINNED_MAXX", "1G"},
                           {"STOKE_" + std::string(5000, 'X'), "1"}});
  ASSERT_EQ(c.warnings().size(), 3u);
  EXPECT_NE(c.warnings()[0].find("did you mean STOKE_CACHE?"), std::string::npos)
      << c.warnings()[0];
  EXPECT_NE(c.warnings()[1].find("did you mean STOKE_HOST_PINNED_MAX?"), std::string::npos)
      << c.warnings()[1];
  EXPECT_EQ(c.warnings()[2].find("did you mean"), std::string::npos);
}

TEST(Config, AuxiliaryVariablesAreNotReportedAsUnknown) {
  const auto c = load_env({{"STOKE_CUDA_PLUGIN", "off"}});
  EXPECT_TRUE(c.warnings().empty());
}

TEST(Config, MoreThreadsThanPhysicalCoresIsAllowedButWarned) {
  const auto c = load_env({{"STOKE_CPU_THREADS", "16"}}, /*physical_cores=*/4);
  EXPECT_EQ(*c.settings().cpu_threads, 16);
  ASSERT_FALSE(c.warnings().empty());
  EXPECT_NE(c.warnings()[0].find("more than the 4 physical cores"), std::string::npos);
  EXPECT_TRUE(load_env({{"STOKE_CPU_THREADS", "4"}}, 4).warnings().empty());
}

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ =
        std::filesystem::temp_directory_path() /
        ("stoke_config_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".conf");
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  std::filesystem::path path_;
};

TEST_F(ConfigFile, PrecedenceIsDefaultThenFileThenEnvironmentThenApi) {
  write(
      "# comment line\nSTOKE_CPU_THREADS = 2\nprefetch_depth=3   # short names work\n"
      "STOKE_CACHE = file:/tmp/stoke.cache\n");
  ConfigLoadOptions options;
  options.file = path_;
  options.environment = Env{{"STOKE_PREFETCH_DEPTH", "5"}};
  options.physical_cores = 8;
  auto c = Config::load(options);
  EXPECT_EQ(*c.settings().cpu_threads, 2);
  EXPECT_EQ(c.knob("STOKE_CPU_THREADS").source, ConfigSource::kFile);
  EXPECT_EQ(c.knob("STOKE_CPU_THREADS").origin, path_.string() + ":2");
  EXPECT_EQ(c.settings().prefetch_depth, 5);
  EXPECT_EQ(c.knob("STOKE_PREFETCH_DEPTH").source, ConfigSource::kEnvironment);
  EXPECT_EQ(c.settings().cache.kind, CacheSpec::Kind::kFile);
  EXPECT_EQ(c.settings().cache.path, "/tmp/stoke.cache");
  EXPECT_EQ(c.knob("STOKE_GPU_MEM_PERCENT").source, ConfigSource::kDefault);

  c.set("STOKE_PREFETCH_DEPTH", "7");
  EXPECT_EQ(c.settings().prefetch_depth, 7);
  EXPECT_EQ(c.knob("STOKE_PREFETCH_DEPTH").source, ConfigSource::kApi);

  const auto report = c.report();
  EXPECT_NE(report.find("STOKE_CPU_THREADS"), std::string::npos);
  EXPECT_NE(report.find(path_.string() + ":2"), std::string::npos) << report;
  EXPECT_NE(report.find("api"), std::string::npos);
}

TEST_F(ConfigFile, FileNamedByStokeConfigIsRead) {
  write("STOKE_GPU_MEM_PERCENT=45\n");
  auto c = load_env({{"STOKE_CONFIG", path_.string()}});
  EXPECT_EQ(c.settings().gpu_mem_percent, 45.0);
  EXPECT_TRUE(c.warnings().empty());
}

TEST_F(ConfigFile, BadValueNamesFileAndLine) {
  write("\n\nSTOKE_GPU_MEM_PERCENT = 150\n");
  ConfigLoadOptions options;
  options.file = path_;
  options.environment = Env{};
  try {
    Config::load(options);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path_.string() + ":3"), std::string::npos) << e.what();
  }
}

TEST_F(ConfigFile, UnknownKeyIsAnErrorWithSuggestion) {
  write("STOKE_PREFETCH_DEPT = 3\n");
  ConfigLoadOptions options;
  options.file = path_;
  options.environment = Env{};
  try {
    Config::load(options);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean STOKE_PREFETCH_DEPTH?"), std::string::npos)
        << e.what();
  }
}

TEST_F(ConfigFile, MalformedLineAndMissingFileAreErrors) {
  write("just some words\n");
  ConfigLoadOptions options;
  options.file = path_;
  options.environment = Env{};
  EXPECT_THROW(Config::load(options), ConfigError);
  options.file = path_.string() + ".does-not-exist";
  try {
    Config::load(options);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("does-not-exist"), std::string::npos);
  }
}

TEST(Config, ApiSetValidatesLikeTheEnvironment) {
  Config c;
  EXPECT_THROW(c.set("STOKE_CPU_THREADS", "0"), ConfigError);
  EXPECT_THROW(c.set("STOKE_NOT_A_KNOB", "1"), ConfigError);
  c.set("cpu_threads", "auto");
  EXPECT_FALSE(c.settings().cpu_threads.has_value());
  c.set("gpu_mem_max", "none");
  EXPECT_FALSE(c.settings().gpu_mem_max.has_value());
  EXPECT_EQ(c.settings().precision, Precision::kFp32);
  c.set("STOKE_PRECISION", " BF16 ");
  EXPECT_EQ(c.settings().precision, Precision::kBf16);
  c.set("precision", "auto");
  EXPECT_EQ(c.settings().precision, Precision::kAuto);
  c.set("STOKE_PRECISION", "int8");
  EXPECT_EQ(c.settings().precision, Precision::kInt8);
  EXPECT_THROW(c.set("STOKE_PRECISION", "int4"), ConfigError);
}

TEST(Config, JsonListsEveryKnob) {
  const auto json = load_env({{"STOKE_CPU_THREADS", "2"}}).to_json();
  for (const auto& name : Config::known_names()) {
    EXPECT_NE(json.find("\"" + name + "\""), std::string::npos) << name;
  }
  EXPECT_NE(json.find("\"environment\""), std::string::npos);
}

TEST(Config, ThreadDefaultsLeaveOneCoreToDriveTheGpu) {
  Settings s;
  CpuInfo cpu;
  cpu.physical_cores = 8;
  EXPECT_EQ(resolve_cpu_threads(s, cpu, /*gpu_computes=*/true), 7);
  EXPECT_EQ(resolve_cpu_threads(s, cpu, /*gpu_computes=*/false), 8);
  cpu.physical_cores = 1;
  EXPECT_EQ(resolve_cpu_threads(s, cpu, true), 1);
  s.cpu_threads = 5;
  EXPECT_EQ(resolve_cpu_threads(s, cpu, true), 5);
}

TEST(Config, ForcedSimdNeverExceedsTheCpu) {
  Settings s;
  CpuInfo cpu;
  cpu.simd = SimdLevel::kAvx2;
  EXPECT_EQ(resolve_simd(s, cpu), SimdLevel::kAvx2);
  s.cpu_simd = {false, SimdLevel::kAvx512};
  EXPECT_EQ(resolve_simd(s, cpu), SimdLevel::kAvx2);
  s.cpu_simd = {false, SimdLevel::kScalar};
  EXPECT_EQ(resolve_simd(s, cpu), SimdLevel::kScalar);
}

}  // namespace
}  // namespace stoke
