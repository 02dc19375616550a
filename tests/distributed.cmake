# One rank of the multi-process tests in tests/unit/distributed_test.cpp.
add_executable(stoke_dist_worker ${CMAKE_CURRENT_SOURCE_DIR}/tools/dist_worker.cpp)
target_include_directories(stoke_dist_worker PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/lib)
target_link_libraries(stoke_dist_worker PRIVATE stoke_warnings)
stoke_link_internals(stoke_dist_worker)
add_dependencies(stoke_unit_tests stoke_dist_worker)
target_compile_definitions(stoke_unit_tests PRIVATE
  STOKE_DIST_WORKER="$<TARGET_FILE:stoke_dist_worker>")
