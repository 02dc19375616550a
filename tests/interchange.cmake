# ONNX Runtime parity and weight import (tests/interchange/): the scripts make
# their own Python virtual environment with onnx and onnxruntime (cached in
# ~/.cache/stoke, or STOKE_PY_CACHE) and skip (77) only when that cannot be made.
add_executable(stoke_interchange_tool ${CMAKE_CURRENT_SOURCE_DIR}/tools/interchange_tool.cpp)
target_link_libraries(stoke_interchange_tool PRIVATE stoke stoke_warnings)
add_test(NAME Interchange.OnnxRuntimeParity
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh export
                 $<TARGET_FILE:stoke_interchange_tool> ${CMAKE_CURRENT_BINARY_DIR}/interchange_export)
add_test(NAME Interchange.ImportGeneratedFiles
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh import
                 $<TARGET_FILE:stoke_interchange_tool> ${CMAKE_CURRENT_BINARY_DIR}/interchange_import)
add_test(NAME Interchange.TorchvisionExport
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh torchvision
                 $<TARGET_FILE:stoke_interchange_tool> ${CMAKE_CURRENT_BINARY_DIR}/interchange_torch)
# stoke import with class names and normalization -> stoke predict, against PyTorch.
add_test(NAME Interchange.DeployableImport
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh deploy_import
                 $<TARGET_FILE:stoke_cli> ${CMAKE_CURRENT_BINARY_DIR}/interchange_deploy)
# The anomaly models' export (PatchCore, PaDiM) in ONNX Runtime against stoke's scores and maps.
add_executable(stoke_anomaly_export_tool ${CMAKE_CURRENT_SOURCE_DIR}/tools/anomaly_export_tool.cpp)
target_link_libraries(stoke_anomaly_export_tool PRIVATE stoke stoke_warnings)
add_test(NAME Interchange.AnomalyOnnxRuntimeParity
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh anomaly_export
                 $<TARGET_FILE:stoke_anomaly_export_tool> ${CMAKE_CURRENT_BINARY_DIR}/interchange_anomaly)
# A segmentation model file through `stoke export` in ONNX Runtime against stoke's logits.
add_executable(stoke_segment_export_tool ${CMAKE_CURRENT_SOURCE_DIR}/tools/segment_export_tool.cpp)
target_link_libraries(stoke_segment_export_tool PRIVATE stoke stoke_warnings)
add_test(NAME Interchange.SegmentOnnxRuntimeParity
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh segment_export
                 $<TARGET_FILE:stoke_segment_export_tool> ${CMAKE_CURRENT_BINARY_DIR}/interchange_segment
                 $<TARGET_FILE:stoke_cli>)
# stoke quantize --precision int8 -> stoke export (QDQ int8) in ONNX Runtime
# against stoke's own int8 logits, and a wrong scale caught (int8_qdq_check.py).
add_executable(stoke_int8_qdq_tool ${CMAKE_CURRENT_SOURCE_DIR}/tools/int8_qdq_tool.cpp)
target_link_libraries(stoke_int8_qdq_tool PRIVATE stoke stoke_warnings)
add_test(NAME Interchange.Int8QdqOnnxRuntimeParity
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh int8_qdq
                 $<TARGET_FILE:stoke_cli> ${CMAKE_CURRENT_BINARY_DIR}/interchange_int8_qdq
                 $<TARGET_FILE:stoke_int8_qdq_tool>)
# stoke export --fp16 in ONNX Runtime against stoke's fp32 logits (fp16_check.py).
add_test(NAME Interchange.Fp16OnnxRuntimeParity
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/interchange/run.sh fp16
                 $<TARGET_FILE:stoke_cli> ${CMAKE_CURRENT_BINARY_DIR}/interchange_fp16
                 $<TARGET_FILE:stoke_int8_qdq_tool>)
set_tests_properties(Interchange.OnnxRuntimeParity Interchange.ImportGeneratedFiles Interchange.TorchvisionExport
                     Interchange.DeployableImport Interchange.AnomalyOnnxRuntimeParity
                     Interchange.SegmentOnnxRuntimeParity Interchange.Int8QdqOnnxRuntimeParity
                     Interchange.Fp16OnnxRuntimeParity
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 LABELS python RESOURCE_LOCK stoke_py_venv)
