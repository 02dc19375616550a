# Fuzz regression replay (any compiler, part of ctest): each fuzz target's
# LLVMFuzzerTestOneInput linked with a small main that feeds it the committed
# seed corpus and every kept crash reproducer. The libFuzzer binaries
# themselves are built by STOKE_BUILD_FUZZERS (tests/fuzz/CMakeLists.txt).
include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/targets.cmake)
foreach(name IN LISTS STOKE_FUZZ_TARGETS)
  add_executable(stoke_fuzz_replay_${name} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${name}.cpp
                                           ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.cpp)
  target_include_directories(stoke_fuzz_replay_${name} PRIVATE ${PROJECT_SOURCE_DIR}/lib)
  target_link_libraries(stoke_fuzz_replay_${name} PRIVATE ZLIB::ZLIB stoke_warnings)
  stoke_fuzz_link_library(stoke_fuzz_replay_${name} ${name})
  add_test(NAME Fuzz.Replay.${name}
           COMMAND stoke_fuzz_replay_${name} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name}
                   ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/crashes/${name})
  set_tests_properties(Fuzz.Replay.${name} PROPERTIES TIMEOUT 60 LABELS fuzz)
endforeach()
# The seed corpus generator (tests/fuzz/make_corpus.cpp; see tests/fuzz/README.md).
add_executable(stoke_fuzz_make_corpus ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/make_corpus.cpp)
find_package(TIFF REQUIRED)
target_link_libraries(stoke_fuzz_make_corpus PRIVATE stoke ZLIB::ZLIB TIFF::TIFF stoke_warnings)
