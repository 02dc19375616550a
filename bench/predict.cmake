# Per-image latency of `stoke predict`'s path (bench/predict_latency.sh runs it
# beside the same network in PyTorch).
add_executable(stoke_bench_predict ${CMAKE_CURRENT_SOURCE_DIR}/predict_latency.cpp)
target_link_libraries(stoke_bench_predict PRIVATE stoke stoke_warnings)
set_target_properties(stoke_bench_predict PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
