# The fuzz targets: tests/fuzz/fuzz_<name>.cpp, corpus in corpus/<name>/,
# kept crash reproducers in crashes/<name>/.
set(STOKE_FUZZ_TARGETS jpeg png idx manifest config_file config_env checkpoint cache bmp image_size tiff)
# Targets that include lib/ headers link stoke_internal (lib/CMakeLists.txt),
# the others libstoke.so.
set(STOKE_FUZZ_INTERNAL_TARGETS cache)
function(stoke_fuzz_link_library target name)
  if(name IN_LIST STOKE_FUZZ_INTERNAL_TARGETS)
    stoke_link_internals(${target})
  else()
    target_link_libraries(${target} PRIVATE stoke)
  endif()
endfunction()
