# Tests of the CUDA plugin's internals, linked against stoke_cuda_core. The
# NVRTC tests run on any machine (NVRTC needs no GPU); suites named Gpu* need a
# device, skip with the reason elsewhere and carry the label `gpu`.
if(STOKE_HAVE_CUDA)
  file(GLOB stoke_cuda_test_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cpp)
  add_executable(stoke_cuda_tests ${stoke_cuda_test_sources})
  target_include_directories(stoke_cuda_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(stoke_cuda_tests PRIVATE stoke_cuda_core GTest::gtest_main stoke_warnings)
  stoke_link_internals(stoke_cuda_tests)
  gtest_discover_tests(stoke_cuda_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       TEST_FILTER "-Gpu*")
  gtest_discover_tests(stoke_cuda_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
                       TEST_FILTER "Gpu*" PROPERTIES LABELS gpu)
  add_test(NAME CudaPlugin.ExportsOnlyItsEntryAndLinksCleanly
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cuda/plugin_link_test.sh
                   $<TARGET_FILE:stoke_cuda> ${PROJECT_BINARY_DIR})
endif()

# The GPU machine's check refuses in its preflight where no GPU runs it (here):
# exit 3 within 60 s, naming why, at most 4 files in $OUT. Not labelled gpu.
add_test(NAME DeviceCheck.RefusesWithoutAGpuInItsPreflight
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu/device_check_refusal_test.sh
                 ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(DeviceCheck.RefusesWithoutAGpuInItsPreflight PROPERTIES TIMEOUT 90)

# The device check's verdict rules on fake step results (a binary listing 0
# tests, a crash, a bench that prints FAILED, a sanitizer timeout), then the
# whole script on a fake bundle that "has" a GPU. Not labelled gpu.
add_test(NAME DeviceCheck.VerdictRulesOnFakeStepResults
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu/device_verdict_test.sh ${PROJECT_SOURCE_DIR})
add_test(NAME DeviceCheck.VerdictOfAFakeGpuRunWithACrashAndAFailedBench
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu/device_check_fake_run_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(DeviceCheck.VerdictRulesOnFakeStepResults
                     DeviceCheck.VerdictOfAFakeGpuRunWithACrashAndAFailedBench
                     PROPERTIES TIMEOUT 120)
