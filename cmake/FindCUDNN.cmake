# FindCUDNN: locates cuDNN (headers and libcudnn).
#
# Hints, in order: CUDNN_ROOT (cache or environment), the CUDA toolkit root,
# /usr/local/cuda, and the layout of the nvidia-cudnn pip wheels
# (site-packages/nvidia/cudnn/{include,lib}) of the Python found on PATH.
#
# Defines CUDNN_FOUND, CUDNN_VERSION, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY and the
# imported target CUDNN::cudnn.

set(_cudnn_hints)
foreach(_root IN ITEMS "${CUDNN_ROOT}" "$ENV{CUDNN_ROOT}" "${CUDAToolkit_LIBRARY_ROOT}"
                       "${CUDAToolkit_ROOT}" "$ENV{CUDA_PATH}" /usr/local/cuda)
  if(_root)
    list(APPEND _cudnn_hints "${_root}")
  endif()
endforeach()

find_program(_cudnn_python NAMES python3 python)
if(_cudnn_python)
  execute_process(
    COMMAND "${_cudnn_python}" -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) if nvidia.cudnn.__file__ else list(nvidia.cudnn.__path__)[0])"
    OUTPUT_VARIABLE _cudnn_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _cudnn_rc)
  if(_cudnn_rc EQUAL 0 AND _cudnn_wheel)
    list(APPEND _cudnn_hints "${_cudnn_wheel}")
  endif()
endif()

find_path(CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${_cudnn_hints}
          PATH_SUFFIXES include targets/x86_64-linux/include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cudnn_hints}
             PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu targets/x86_64-linux/lib)

if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_lines REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${_part} ([0-9]+)" _m "${_cudnn_lines}")
    set(_cudnn_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CUDNN_VERSION "${_cudnn_MAJOR}.${_cudnn_MINOR}.${_cudnn_PATCHLEVEL}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR
                                  VERSION_VAR CUDNN_VERSION)

if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn SHARED IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES
    IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
