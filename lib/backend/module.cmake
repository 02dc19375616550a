# Backend build settings (the CPU backend; the CUDA plugin has its own CMakeLists).
# BLAS: Debian's OpenBLAS through the standard soname (libopenblas.so.0, the
# build the alternatives system selects). blas.cpp pins it to one thread so it
# never starts a second thread pool beside the oneTBB arena: sgemm runs on the
# calling TBB worker. (Forcing the serial build through RUNPATH was tried and
# rejected: a process that also loads LAPACK through OpenCV or numpy then mixes
# two OpenBLAS builds under one soname and fails to link or load.)
find_library(STOKE_OPENBLAS_LIBRARY NAMES openblas REQUIRED)
target_link_libraries(stoke PRIVATE ${STOKE_OPENBLAS_LIBRARY})
find_path(STOKE_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-serial openblas-pthread)
target_include_directories(stoke SYSTEM PRIVATE ${STOKE_CBLAS_INCLUDE_DIR})

# The AVX2 kernel table alone is compiled for AVX2 + FMA; it runs only where
# the CPU has them (simd.cpp chooses at run time).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/simd_avx2.cpp
                            PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
