# Engine benchmarks: the CPU train step of the ResNet-style net and the conv
# op against its naive reference. bench/pytorch_step.py times the same net in
# PyTorch for the comparison in bench/RESULTS.md (section "CPU engine").
add_executable(bench_engine ${CMAKE_CURRENT_LIST_DIR}/engine_step.cpp ${CMAKE_CURRENT_LIST_DIR}/engine_ops.cpp)
target_include_directories(bench_engine PRIVATE ${PROJECT_SOURCE_DIR}/lib)
target_link_libraries(bench_engine PRIVATE stoke benchmark::benchmark_main stoke_warnings)
set_target_properties(bench_engine PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
