# Image pipeline benchmarks. OpenCV is an optional, bench-only reference
# (Debian libopencv-dev): without it the OpenCV rows are left out.
find_package(OpenCV QUIET COMPONENTS core imgproc imgcodecs)

add_executable(stoke_bench_pipeline ${CMAKE_CURRENT_LIST_DIR}/pipeline_bench.cpp)
target_link_libraries(stoke_bench_pipeline PRIVATE stoke benchmark::benchmark PkgConfig::TURBOJPEG stoke_warnings)
target_compile_definitions(stoke_bench_pipeline PRIVATE STOKE_BENCH_BINARY_DIR="${PROJECT_BINARY_DIR}"
                           STOKE_BENCH_HAVE_OPENCV=$<BOOL:${OpenCV_FOUND}>)
if(OpenCV_FOUND)
  target_include_directories(stoke_bench_pipeline SYSTEM PRIVATE ${OpenCV_INCLUDE_DIRS})
  target_link_libraries(stoke_bench_pipeline PRIVATE ${OpenCV_LIBS})
  message(STATUS "stoke bench: OpenCV ${OpenCV_VERSION} found, reference rows enabled")
else()
  message(STATUS "stoke bench: OpenCV not found, reference rows disabled (apt-get install libopencv-dev)")
endif()

# Peak RSS of a long pass: bounded by the images in flight, not the dataset.
add_executable(stoke_bench_pipeline_rss ${CMAKE_CURRENT_LIST_DIR}/pipeline_rss.cpp)
target_link_libraries(stoke_bench_pipeline_rss PRIVATE stoke stoke_warnings)
target_compile_definitions(stoke_bench_pipeline_rss PRIVATE STOKE_BENCH_BINARY_DIR="${PROJECT_BINARY_DIR}")
