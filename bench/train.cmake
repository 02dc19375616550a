# stoke-bench: baseline vs tuned training on the embedded synthetic inspection
# dataset (the README's demo).
add_executable(stoke-bench ${CMAKE_CURRENT_SOURCE_DIR}/stoke_bench.cpp ${CMAKE_CURRENT_SOURCE_DIR}/bench_report.cpp)
target_include_directories(stoke-bench PRIVATE ${PROJECT_SOURCE_DIR}/lib ${PROJECT_SOURCE_DIR})
target_link_libraries(stoke-bench PRIVATE stoke stoke_tool_text stoke_warnings)
set_target_properties(stoke-bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin
                      INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS stoke-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
