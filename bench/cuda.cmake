# GPU step time of the ResNet-style net on the CUDA backend (eager and CUDA
# graphs), with bench/pytorch_gpu_step.py as the PyTorch reference. Links only
# libstoke (the CUDA plugin is loaded at run time), so it builds everywhere and
# prints "skipped" where no device exists.
add_executable(stoke_bench_cuda_step ${CMAKE_CURRENT_SOURCE_DIR}/cuda_step_bench.cpp)
target_link_libraries(stoke_bench_cuda_step PRIVATE stoke stoke_warnings)
