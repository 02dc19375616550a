# Engine benchmarks: the CPU train step of the ResNet-style net and the conv
# op against its naive reference. bench/pytorch_step.py times the same net in
# PyTorch for the comparison in bench/RESULTS.md (section "CPU engine").
add_executable(bench_engine ${CMAKE_CURRENT_LIST_DIR}/engine_step.cpp ${CMAKE_CURRENT_LIST_DIR}/engine_ops.cpp)
target_include_directories(bench_engine PRIVATE ${PROJECT_SOURCE_DIR}/lib)
target_link_libraries(bench_engine PRIVATE benchmark::benchmark_main stoke_warnings)
stoke_link_internals(bench_engine)  # the naive reference (lib/backend/cpu/naive.hpp)
set_target_properties(bench_engine PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)

# The convolution engine decision (issue 16): stoke's conv against Debian's
# oneDNN, bench-only and only where libdnnl-dev is installed.
find_library(STOKE_DNNL_LIBRARY dnnl)
find_path(STOKE_DNNL_INCLUDE dnnl.hpp)
if(STOKE_DNNL_LIBRARY AND STOKE_DNNL_INCLUDE)
  add_executable(bench_engine_conv_dnnl ${CMAKE_CURRENT_LIST_DIR}/engine_conv_dnnl.cpp)
  target_include_directories(bench_engine_conv_dnnl PRIVATE ${PROJECT_SOURCE_DIR}/lib ${STOKE_DNNL_INCLUDE})
  target_link_libraries(bench_engine_conv_dnnl PRIVATE stoke ${STOKE_DNNL_LIBRARY})
  set_target_properties(bench_engine_conv_dnnl PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  # Where oneDNN's Winograd kernels beat its direct ones (the thresholds' table).
  add_executable(bench_engine_winograd ${CMAKE_CURRENT_LIST_DIR}/engine_winograd.cpp)
  target_include_directories(bench_engine_winograd PRIVATE ${STOKE_DNNL_INCLUDE})
  target_link_libraries(bench_engine_winograd PRIVATE ${STOKE_DNNL_LIBRARY} ${STOKE_GOMP_LIB})
  set_target_properties(bench_engine_winograd PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endif()

# Eval-mode inference of the net: plain forward vs fused (issue 16).
add_executable(bench_engine_infer ${CMAKE_CURRENT_LIST_DIR}/engine_infer.cpp)
target_include_directories(bench_engine_infer PRIVATE ${PROJECT_SOURCE_DIR}/lib)
target_link_libraries(bench_engine_infer PRIVATE stoke_warnings)
stoke_link_internals(bench_engine_infer)  # nn::FusedInference (lib/nn/)
set_target_properties(bench_engine_infer PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
