# Memory pool and prefetch benchmarks: the pool against malloc/free (host) and
# cudaMalloc/cudaFree (device, skipped without one), staging bandwidth, and the
# prefetch ring's overlap on the CPU with real producer/consumer work.
add_executable(stoke_bench_memory
  ${CMAKE_CURRENT_SOURCE_DIR}/memory_pool_bench.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/memory_prefetch_bench.cpp)
target_include_directories(stoke_bench_memory PRIVATE ${PROJECT_SOURCE_DIR}/lib)
target_link_libraries(stoke_bench_memory PRIVATE benchmark::benchmark_main stoke_warnings)
stoke_link_internals(stoke_bench_memory)  # the block allocator, device handles (lib/)
