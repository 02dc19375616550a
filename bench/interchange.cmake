# ResNet-18 at 224x224: stoke's train step and inference, and the exported
# ONNX file; bench/interchange_bench.py times PyTorch and ONNX Runtime beside
# it for bench/RESULTS.md (section "torchvision backbones and ONNX").
add_executable(bench_resnet ${CMAKE_CURRENT_LIST_DIR}/resnet_bench.cpp)
target_link_libraries(bench_resnet PRIVATE stoke stoke_warnings)
set_target_properties(bench_resnet PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
add_executable(bench_finetune ${CMAKE_CURRENT_LIST_DIR}/finetune_bench.cpp)
target_link_libraries(bench_finetune PRIVATE stoke stoke_warnings)
set_target_properties(bench_finetune PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
