# The segmentation ops against PyTorch (tests/segment/): F.interpolate,
# F.cross_entropy and segmentation_models_pytorch's Dice loss in plain PyTorch;
# skips (77) with the reason where PyTorch is missing.
add_executable(stoke_segment_ops_tool ${CMAKE_CURRENT_SOURCE_DIR}/tools/segment_ops_tool.cpp)
target_link_libraries(stoke_segment_ops_tool PRIVATE stoke stoke_warnings)
add_test(NAME Segment.OpsMatchPyTorch
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/segment/run.sh
                 $<TARGET_FILE:stoke_segment_ops_tool> ${CMAKE_CURRENT_BINARY_DIR}/segment_parity)
set_tests_properties(Segment.OpsMatchPyTorch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS python)
