# PatchCore and PaDiM parity with a PyTorch reference (tests/anomaly/):
# anomalib's PatchcoreModel where it imports, else anomalib's definitions in
# plain PyTorch (PaDiM: always the definitions); skips (77) with the reason
# where PyTorch is missing.
add_executable(stoke_anomaly_tool ${CMAKE_CURRENT_SOURCE_DIR}/tools/anomaly_tool.cpp)
target_link_libraries(stoke_anomaly_tool PRIVATE stoke stoke_warnings)
add_test(NAME Anomaly.PatchCoreParityWithPyTorch
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/anomaly/run.sh
                 $<TARGET_FILE:stoke_anomaly_tool> ${CMAKE_CURRENT_BINARY_DIR}/anomaly_parity patchcore)
set_tests_properties(Anomaly.PatchCoreParityWithPyTorch
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS python)
add_test(NAME Anomaly.PadimParityWithPyTorch
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/anomaly/run.sh
                 $<TARGET_FILE:stoke_anomaly_tool> ${CMAKE_CURRENT_BINARY_DIR}/anomaly_parity_padim padim)
set_tests_properties(Anomaly.PadimParityWithPyTorch
                     PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS python)

# The CLI's anomaly path (train --task anomaly -> eval -> predict, the memory cap).
add_test(NAME Cli.AnomalyTrainEvalPredict
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_anomaly.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.AnomalyTrainEvalPredict PROPERTIES TIMEOUT 300)
