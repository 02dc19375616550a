# The U-Net segmentation model against PyTorch (tests/segment_model/):
# segmentation_models_pytorch's Unet written out in plain PyTorch; skips (77)
# with the reason where PyTorch is missing.
add_executable(stoke_unet_parity_tool ${CMAKE_CURRENT_SOURCE_DIR}/tools/unet_parity_tool.cpp)
target_link_libraries(stoke_unet_parity_tool PRIVATE stoke stoke_warnings)
add_test(NAME Segment.UnetMatchesPyTorch
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/segment_model/run.sh
                 $<TARGET_FILE:stoke_unet_parity_tool> ${CMAKE_CURRENT_BINARY_DIR}/unet_parity)
set_tests_properties(Segment.UnetMatchesPyTorch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS python)
