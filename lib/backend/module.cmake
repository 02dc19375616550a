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

# Convolution engine: Debian's oneDNN (libdnnl-dev) where installed, else the
# im2col + OpenBLAS kernels (lib/backend/cpu/conv2d.cpp). Its OpenMP runtime
# (libgomp) is linked directly: conv2d_dnnl*.cpp (and the blocked-layout
# inference kernels, conv2d_blocked.cpp and pool_blocked.cpp) run every
# primitive with one OpenMP thread inside the oneTBB chunks. Decision:
# bench/RESULTS.md, "Convolution engine".
option(STOKE_WITH_DNNL "CPU convolutions through oneDNN where it is installed" ON)
find_library(STOKE_DNNL_LIB dnnl)
find_path(STOKE_DNNL_INC dnnl.hpp)
find_library(STOKE_GOMP_LIB NAMES gomp libgomp.so.1)
if(STOKE_WITH_DNNL AND STOKE_DNNL_LIB AND STOKE_DNNL_INC AND STOKE_GOMP_LIB)
  target_link_libraries(stoke PRIVATE ${STOKE_DNNL_LIB} ${STOKE_GOMP_LIB})
  target_include_directories(stoke_backend SYSTEM PRIVATE ${STOKE_DNNL_INC})
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_dnnl.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_dnnl_backward.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_dnnl_primitive.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_dnnl_layout.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_blocked.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/conv2d_int8.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/pool_blocked.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/dnnl_isa.cpp
                      ${CMAKE_CURRENT_LIST_DIR}/cpu/blas.cpp
               APPEND PROPERTY COMPILE_DEFINITIONS STOKE_HAVE_DNNL=1)
  message(STATUS "stoke: CPU convolutions through oneDNN (${STOKE_DNNL_LIB})")
else()
  message(STATUS "stoke: oneDNN not found or STOKE_WITH_DNNL=OFF; CPU convolutions use im2col + OpenBLAS")
endif()
