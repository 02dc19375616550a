# NVRTC compiles the prefetcher's device normalize kernel for every supported
# architecture: runs here without a GPU (NVRTC needs no driver).
if(STOKE_HAVE_CUDA)
  add_executable(stoke_memory_nvrtc_tests ${CMAKE_CURRENT_SOURCE_DIR}/memory/normalize_nvrtc_test.cpp)
  target_include_directories(stoke_memory_nvrtc_tests PRIVATE ${PROJECT_SOURCE_DIR}/lib)
  target_link_libraries(stoke_memory_nvrtc_tests PRIVATE CUDA::nvrtc GTest::gtest_main stoke_warnings)
  gtest_discover_tests(stoke_memory_nvrtc_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60)
endif()
