# Data-parallel collectives: Gloo (Debian's libgloo-dev) when found, else a
# stub whose make_communicator answers Unsupported for more than one rank.
find_package(Gloo CONFIG QUIET)
set(STOKE_HAVE_GLOO ${Gloo_FOUND} CACHE INTERNAL "Gloo found for data-parallel training")
if(Gloo_FOUND)
  target_link_libraries(stoke PRIVATE gloo)
  # Gloo's redis_store.h includes <hiredis.h>; Debian puts it one folder down.
  find_path(STOKE_HIREDIS_INCLUDE_DIR hiredis.h PATH_SUFFIXES hiredis REQUIRED)
  target_include_directories(stoke SYSTEM PRIVATE ${STOKE_HIREDIS_INCLUDE_DIR})
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/gloo_unavailable.cpp PROPERTIES HEADER_FILE_ONLY ON)
  message(STATUS "stoke: data-parallel training on Gloo")
else()
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/gloo_communicator.cpp PROPERTIES HEADER_FILE_ONLY ON)
  message(STATUS "stoke: Gloo not found (libgloo-dev): one rank only")
endif()
