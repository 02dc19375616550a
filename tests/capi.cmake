# The C ABI (include/stoke/stoke.h) from its hosts (tests/capi/hosts_test.sh):
# a C program compiled as C99 and as C++ (-Wall -Wextra -Werror -pedantic),
# the C# example by P/Invoke under Mono and the Python example by ctypes, the
# last two checked bit for bit against `stoke predict --json`. Status 77 is a
# skip whose reason the output names (no mcs/mono; an ASan build for the
# interpreted hosts).
find_package(Python3 COMPONENTS Interpreter)
set(stoke_capi_test ${CMAKE_CURRENT_SOURCE_DIR}/capi/hosts_test.sh)
add_test(NAME CApi.HeaderAsC99AndCxxProgram
         COMMAND ${stoke_capi_test} c $<TARGET_FILE:stoke_cli> $<TARGET_FILE_DIR:stoke>
                 ${PROJECT_SOURCE_DIR} ${CMAKE_CXX_COMPILER} "${CMAKE_CXX_FLAGS}"
                 "${CMAKE_EXE_LINKER_FLAGS}")
add_test(NAME CApi.CSharpPInvokeHost
         COMMAND ${stoke_capi_test} csharp $<TARGET_FILE:stoke_cli> $<TARGET_FILE_DIR:stoke>
                 ${PROJECT_SOURCE_DIR})
set(stoke_capi_tests CApi.HeaderAsC99AndCxxProgram CApi.CSharpPInvokeHost)
if(Python3_FOUND)
  add_test(NAME CApi.PythonCtypesHost
           COMMAND ${stoke_capi_test} python $<TARGET_FILE:stoke_cli> $<TARGET_FILE_DIR:stoke>
                   ${PROJECT_SOURCE_DIR} ${Python3_EXECUTABLE})
  list(APPEND stoke_capi_tests CApi.PythonCtypesHost)
endif()
set_tests_properties(${stoke_capi_tests} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS capi)
