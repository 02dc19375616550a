// This binary links stoke's internals statically (stoke_internal, see
// lib/CMakeLists.txt) instead of libstoke.so. When it loads the CUDA plugin,
// the plugin's calls into its host must bind to this binary's copy of the
// library (one logger, one set of exception typeinfo), not to the
// libstoke.so the plugin names as its dependency.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "backend/update_scalars.hpp"
#include "gpu/plugin_loader.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/memory.hpp"

namespace {

// `fn`, defined in this program, is in its dynamic symbol table and is what
// the process's global lookup scope (searched first for a dlopen'ed
// plugin's imports) finds under its name.
void expect_global_definition_is_here(void* fn, const char* what) {
  Dl_info info{};
  ASSERT_NE(dladdr(fn, &info), 0) << what;
  ASSERT_NE(info.dli_sname, nullptr) << what << " is not exported by this program (ENABLE_EXPORTS)";
  EXPECT_EQ(dlsym(RTLD_DEFAULT, info.dli_sname), fn) << what << " (" << info.dli_sname << ")";
}

TEST(PluginHost, ProgramExportsWhatThePluginCallsInItsHost) {
  using Log = void (*)(stoke::LogLevel, std::string_view);
  expect_global_definition_is_here(reinterpret_cast<void*>(static_cast<Log>(&stoke::log)),
                                   "stoke::log");
  expect_global_definition_is_here(reinterpret_cast<void*>(&stoke::check_write_values),
                                   "stoke::check_write_values (STOKE_PLUGIN_HOST)");
  // The typeinfo the plugin's throws and catches use.
  expect_global_definition_is_here(
      const_cast<void*>(static_cast<const void*>(&typeid(stoke::InvalidArgument))),
      "typeinfo for stoke::InvalidArgument");
}

TEST(PluginHost, CudaPluginLoadsIntoAProgramLinkingTheInternals) {
  // Named explicitly: the default search does not open the plugin on a
  // machine without a CUDA driver, a named plugin is opened all the same.
  const std::string built_plugin = STOKE_TEST_BINARY_DIR "/lib/libstoke_cuda.so";
  if (std::filesystem::exists(built_plugin)) stoke::detail::request_cuda_plugin(built_plugin, "");
  const stoke::detail::PluginLoad& load = stoke::detail::cuda_plugin();
  if (!load.built) GTEST_SKIP() << load.error;
  if (load.error.find("disabled") != std::string::npos) GTEST_SKIP() << load.error;
  EXPECT_NE(load.plugin, nullptr) << load.error;
  EXPECT_EQ(load.error.find("undefined symbol"), std::string::npos) << load.error;
}

}  // namespace
