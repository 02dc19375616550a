# Each instruction set's row kernels are compiled in their own translation
# unit with only that unit's flags; the rest of libstoke stays at the baseline
# ISA and never needs -march=native. -ffp-contract=off keeps multiply-then-add
# in every table (no FMA fusing), so SIMD results equal the scalar path.
# -Wno-maybe-uninitialized on AVX-512 only: GCC 12 false positive inside
# avx512fintrin.h (_mm512_undefined_*), not in our code.
set(_stoke_image_dir ${CMAKE_CURRENT_LIST_DIR})
set_source_files_properties(${_stoke_image_dir}/kernels_scalar.cpp PROPERTIES
  COMPILE_OPTIONS "-ffp-contract=off")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  set_source_files_properties(${_stoke_image_dir}/kernels_sse4.cpp PROPERTIES
    COMPILE_OPTIONS "-msse4.1;-msse4.2;-ffp-contract=off")
  set_source_files_properties(${_stoke_image_dir}/kernels_avx2.cpp PROPERTIES
    COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-ffp-contract=off")
  set_source_files_properties(${_stoke_image_dir}/kernels_avx512.cpp PROPERTIES
    COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512dq;-mavx512vl;-mavx512cd;-mavx2;-mfma;-mf16c;-ffp-contract=off;$<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>")
endif()

# TIFF decoding (lib/image/tiff.cpp, tiff_striles.cpp) through Debian's libtiff (libtiff-dev).
find_package(TIFF REQUIRED)
target_link_libraries(stoke PRIVATE TIFF::TIFF)
if(TARGET stoke_image)  # modules are object libraries (lib/CMakeLists.txt on main)
  target_link_libraries(stoke_image PRIVATE TIFF::TIFF)
endif()
