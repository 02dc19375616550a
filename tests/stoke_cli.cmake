# The `stoke` command: dataset -> train -> eval -> predict on a tiny dataset,
# and Ctrl-C writing the stop checkpoint.
add_test(NAME Cli.StokeTrainEvalPredict
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_smoke.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.StokeTrainEvalPredict PROPERTIES TIMEOUT 300)

# Misuse and faults (issue 25): one CTest per case of tests/install/stoke_cli_faults.sh;
# status 77 is a skip whose reason the output names.
set(stoke_cli_fault_cases cache_with_validation cache_refuses_foreign_file nan_learning_rate
    model_not_regular_file export_atomic output_names_input crafted_model_file hostile_arguments
    sigterm_writes_stop_checkpoint skip_corrupt folder_rule success_only_when_written
    outputs_checked_first val_classes_checked bad_values_refused max_image_pixels json_is_utf8
    impossible_splits report_bounded sigterm_under_nproc address_space_limit
    model_without_training_images dist_store_not_created hung_rank_named)
foreach(fault_case IN LISTS stoke_cli_fault_cases)
  add_test(NAME Cli.Faults.${fault_case}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_faults.sh $<TARGET_FILE:stoke_cli>
                   ${fault_case})
  set_tests_properties(Cli.Faults.${fault_case} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
endforeach()

# stoke dataset --task segment: the segmentation layout (docs/segmentation.md).
add_test(NAME Cli.DatasetSegment
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_segment_data.sh
                 $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.DatasetSegment PROPERTIES TIMEOUT 120)

# --precision on info, train, predict and eval (docs/precision.md); status 77:
# no bf16 kernels on this CPU (the refusal is checked before the skip).
add_test(NAME Cli.Precision
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_precision.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.Precision PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)

# stoke import writes deployable model files (an ONNX export comes back whole).
add_test(NAME Cli.ImportDeployable
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_import.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.ImportDeployable PROPERTIES TIMEOUT 300)

# stoke quantize: the bf16 gate on a classifier and anomaly models (PatchCore, PaDiM).
add_test(NAME Cli.QuantizeGate
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_quantize.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.QuantizeGate PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# The same where oneDNN has no bf16 (capped at AVX2): a clear refusal, nothing written.
add_test(NAME Cli.QuantizeGateWithoutBf16
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_quantize.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.QuantizeGateWithoutBf16 PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;STOKE_TEST_EXPECT_NO_BF16=1")

# stoke train --task segment -> eval -> predict --masks (docs/segmentation-cli.md).
add_test(NAME Cli.SegmentTrainEvalPredict
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_segment.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.SegmentTrainEvalPredict PROPERTIES TIMEOUT 120)
# int8: a good calibration passes the gate, one black image is refused (--force writes it).
add_test(NAME Cli.QuantizeInt8
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_quantize_int8.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.QuantizeInt8 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77)
# The same without VNNI (oneDNN capped at AVX2: int8 emulated, 7-bit u8 inputs).
add_test(NAME Cli.QuantizeInt8Avx2
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_quantize_int8.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.QuantizeInt8Avx2 PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 ENVIRONMENT
                     "ONEDNN_MAX_CPU_ISA=AVX2;DNNL_MAX_CPU_ISA=AVX2;STOKE_TEST_INT8_EMULATED=1")
