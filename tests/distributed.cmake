# One rank of the multi-process tests in tests/unit/distributed_test.cpp.
add_executable(stoke_dist_worker ${CMAKE_CURRENT_SOURCE_DIR}/tools/dist_worker.cpp)
target_include_directories(stoke_dist_worker PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/lib)
target_link_libraries(stoke_dist_worker PRIVATE stoke_warnings)
stoke_link_internals(stoke_dist_worker)
add_dependencies(stoke_unit_tests stoke_dist_worker)
target_compile_definitions(stoke_unit_tests PRIVATE
  STOKE_DIST_WORKER="$<TARGET_FILE:stoke_dist_worker>")

# Two machines rehearsed on one (issue 27, docs/distributed.md): two network
# namespaces joined by a veth pair, Debian's redis-server as the rendezvous,
# one rank of `stoke train` in each. Needs root; status 77 is a skip whose
# reason the output names (no namespaces, no redis-server, no Gloo).
add_test(NAME Distributed.TwoHostRehearsal
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/two_host_rehearsal.sh $<TARGET_FILE:stoke_cli>)
set_tests_properties(Distributed.TwoHostRehearsal PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77)
