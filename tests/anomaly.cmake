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

# The same against anomalib 2.7 itself (tests/anomaly/anomalib_run.sh): a
# virtual environment made once with `pip install anomalib==2.7.0` (or
# STOKE_ANOMALIB_PYTHON); the first test to need it installs it (minutes), under
# a lock. Skips (77) with the reason where it cannot be installed.
foreach(method patchcore padim)
  if(method STREQUAL "patchcore")
    set(name Anomaly.PatchCoreParityWithAnomalib)
  else()
    set(name Anomaly.PadimParityWithAnomalib)
  endif()
  add_test(NAME ${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/anomaly/anomalib_run.sh
                   $<TARGET_FILE:stoke_anomaly_tool> ${CMAKE_CURRENT_BINARY_DIR}/anomalib_parity_${method}
                   ${method})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1500 LABELS python)
endforeach()

# The CLI's anomaly path (train --task anomaly -> eval -> predict, the memory cap).
add_test(NAME Cli.AnomalyTrainEvalPredict
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_anomaly.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.AnomalyTrainEvalPredict PROPERTIES TIMEOUT 300)
