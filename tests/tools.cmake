# Helper programs the tests start as separate processes.
add_executable(stoke_crash_writer ${CMAKE_CURRENT_SOURCE_DIR}/tools/crash_writer.cpp)
target_link_libraries(stoke_crash_writer PRIVATE stoke stoke_warnings)
add_dependencies(stoke_unit_tests stoke_crash_writer)
target_compile_definitions(stoke_unit_tests PRIVATE
  STOKE_CRASH_WRITER="$<TARGET_FILE:stoke_crash_writer>")
