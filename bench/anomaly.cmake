# PatchCore fit and scoring time beside a PyTorch reference (bench/anomaly_bench.sh).
add_executable(stoke_bench_anomaly ${CMAKE_CURRENT_SOURCE_DIR}/anomaly_fit_infer.cpp)
target_link_libraries(stoke_bench_anomaly PRIVATE stoke stoke_warnings)
set_target_properties(stoke_bench_anomaly PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
