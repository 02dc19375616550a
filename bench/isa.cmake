# The arithmetic ceiling of fp32, bf16 and int8 on this CPU (issue 28): the
# throughput of each precision's multiply-accumulate instruction.
add_executable(stoke_bench_isa_peak ${CMAKE_CURRENT_SOURCE_DIR}/isa_peak.cpp)
target_link_libraries(stoke_bench_isa_peak PRIVATE stoke_warnings)
set_target_properties(stoke_bench_isa_peak PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
