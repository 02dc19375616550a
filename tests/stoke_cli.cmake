# The `stoke` command: dataset -> train -> eval -> predict on a tiny dataset,
# and Ctrl-C writing the stop checkpoint.
add_test(NAME Cli.StokeTrainEvalPredict
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_smoke.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Cli.StokeTrainEvalPredict PROPERTIES TIMEOUT 300)
