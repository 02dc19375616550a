# stoke audit (docs/audit.md): planted duplicates across a train and a val set
# found, clean sets without cross-split pairs, a corrupt file listed, the report.
# stoke_audit_images writes the altered copies with stoke's own codecs.
add_executable(stoke_audit_images ${CMAKE_CURRENT_SOURCE_DIR}/tools/audit_images.cpp)
target_link_libraries(stoke_audit_images PRIVATE stoke stoke_warnings)
add_test(NAME Cli.Audit
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/stoke_cli_audit.sh $<TARGET_FILE:stoke_cli>
                 $<TARGET_FILE:stoke_audit_images>)
set_tests_properties(Cli.Audit PROPERTIES TIMEOUT 300)
