# The segmentation model's training step (bench/segment_step.sh runs it beside
# the same U-Net in PyTorch; the device check runs both on the GPU).
add_executable(stoke_bench_segment_step ${CMAKE_CURRENT_SOURCE_DIR}/segment_step.cpp)
target_link_libraries(stoke_bench_segment_step PRIVATE stoke stoke_warnings)
set_target_properties(stoke_bench_segment_step PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                      ${PROJECT_BINARY_DIR}/bin)
