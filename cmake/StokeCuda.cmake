# Decides whether the CUDA backend plugin (libstoke_cuda.so) is built.
# STOKE_CUDA=AUTO builds it when the CUDA toolkit and cuDNN are found,
# ON requires them, OFF never looks.
set(STOKE_HAVE_CUDA OFF)
if(NOT STOKE_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_package(CUDNN QUIET)
  if(CUDAToolkit_FOUND AND CUDNN_FOUND)
    set(STOKE_HAVE_CUDA ON)
    # nvcc precompiles the custom kernels (the fallback when STOKE_GPU_JIT is off).
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
    endif()
    set(CMAKE_CUDA_ARCHITECTURES ${STOKE_CUDA_ARCHITECTURES})
    enable_language(CUDA)
    message(STATUS "stoke: CUDA plugin enabled (CUDA ${CUDAToolkit_VERSION}, cuDNN ${CUDNN_VERSION}, "
                   "architectures ${STOKE_CUDA_ARCHITECTURES})")
  elseif(STOKE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STOKE_CUDA=ON but the CUDA toolkit (found: ${CUDAToolkit_FOUND}) or cuDNN "
                        "(found: ${CUDNN_FOUND}) is missing; set CUDAToolkit_ROOT / CUDNN_ROOT, "
                        "or configure with -DSTOKE_CUDA=OFF")
  else()
    message(STATUS "stoke: CUDA plugin disabled (CUDA toolkit found: ${CUDAToolkit_FOUND}, "
                   "cuDNN found: ${CUDNN_FOUND})")
  endif()
endif()
