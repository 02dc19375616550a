# Backend build settings (the CPU backend; the CUDA plugin has its own CMakeLists).
#
# BLAS: Debian's OpenBLAS pthread build, linked by full path, pinned to one
# thread (blas.cpp calls openblas_set_num_threads(1)) and called from inside
# the TBB tasks. Not the serial build (openblas-serial/): that one is built
# with USE_THREAD=0, and unless it was also built with USE_LOCKING=1 (its
# config string does not say) its buffer allocator is not safe for calls from
# several threads at once, which is exactly how the CPU backend calls it. The
# pthread build always locks. Its soname (libopenblas.so.0) is shared with the
# serial build and chosen by the alternatives system, so libstoke's RUNPATH
# names the pthread directory. Fallback where that path does not exist: -lopenblas.
set(STOKE_OPENBLAS_DIR /usr/lib/x86_64-linux-gnu/openblas-pthread)
if(EXISTS ${STOKE_OPENBLAS_DIR}/libopenblas.so.0)
  target_link_libraries(stoke PRIVATE ${STOKE_OPENBLAS_DIR}/libopenblas.so.0)
  set_property(TARGET stoke APPEND PROPERTY BUILD_RPATH ${STOKE_OPENBLAS_DIR})
  set_property(TARGET stoke APPEND PROPERTY INSTALL_RPATH ${STOKE_OPENBLAS_DIR})
else()
  target_link_libraries(stoke PRIVATE openblas)
endif()
find_path(STOKE_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas)
target_include_directories(stoke_backend SYSTEM PRIVATE ${STOKE_CBLAS_INCLUDE_DIR})

# The AVX2 kernel table alone is compiled for AVX2 + FMA; it runs only where
# the CPU has them (simd.cpp chooses at run time).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/simd_avx2.cpp
                            PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
