# Backend build settings (the CPU backend; the CUDA plugin has its own CMakeLists).
# BLAS: Debian's serial OpenBLAS, linked by full path. Its soname is the same
# as the pthread build's (libopenblas.so.0, which the alternatives system
# points at the pthread build), so libstoke's RUNPATH names the serial
# directory first; blas.cpp also calls openblas_set_num_threads(1) in case the
# pthread build was loaded anyway. Fallback: -lopenblas.
set(STOKE_OPENBLAS_SERIAL_DIR /usr/lib/x86_64-linux-gnu/openblas-serial)
if(EXISTS ${STOKE_OPENBLAS_SERIAL_DIR}/libopenblas.so.0)
  target_link_libraries(stoke PRIVATE ${STOKE_OPENBLAS_SERIAL_DIR}/libopenblas.so.0)
  set_property(TARGET stoke APPEND PROPERTY BUILD_RPATH ${STOKE_OPENBLAS_SERIAL_DIR})
  set_property(TARGET stoke APPEND PROPERTY INSTALL_RPATH ${STOKE_OPENBLAS_SERIAL_DIR})
else()
  target_link_libraries(stoke PRIVATE openblas)
endif()
find_path(STOKE_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-serial openblas-pthread)
target_include_directories(stoke SYSTEM PRIVATE ${STOKE_CBLAS_INCLUDE_DIR})

# The AVX2 kernel table alone is compiled for AVX2 + FMA; it runs only where
# the CPU has them (simd.cpp chooses at run time).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/simd_avx2.cpp
                            PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
