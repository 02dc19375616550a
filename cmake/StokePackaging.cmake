# Debian packages of an already-built tree (CPack DEB, one package per install
# component; docs/packaging.md):
#   libstoke        runtime   libstoke.so.<major>.<minor> and its real file
#   libstoke-dev    dev       headers, the libstoke.so link, CMake package files, stoke.pc
#   stoke-tools     tools     stoke, stoke-info, stoke-bench
#   libstoke-cuda   cuda      libstoke_cuda.so, the CUDA plugin (only when it is built)
# `cpack -G DEB --config build/CPackConfig.cmake` (or .ci/package.sh, which also
# installs them, builds a consumer against them and removes them again) writes
# them to build/packages/. They install under /usr whatever CMAKE_INSTALL_PREFIX
# says; the installed files find each other by relative paths (RUNPATH
# $ORIGIN/../<libdir>, the plugin beside libstoke, stoke.pc's ${pcfiledir}).

# stoke.pc: the prefix relative to <libdir>/pkgconfig, so the file stays true
# for any install prefix (the package's /usr, or cmake --install --prefix DIR).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "stoke.pc needs CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR relative "
                      "to the prefix (they are ${CMAKE_INSTALL_LIBDIR}, ${CMAKE_INSTALL_INCLUDEDIR})")
endif()
file(RELATIVE_PATH STOKE_PC_PREFIX_FROM_PCFILEDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" STOKE_PC_PREFIX_FROM_PCFILEDIR "${STOKE_PC_PREFIX_FROM_PCFILEDIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/stoke.pc.in ${PROJECT_BINARY_DIR}/stoke.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/stoke.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

# Each package carries the licence as /usr/share/doc/<package>/copyright
# (Debian policy 12.5). Only a component install (CPack) installs it, not a
# plain `cmake --install`.
foreach(component_package IN ITEMS runtime:libstoke dev:libstoke-dev tools:stoke-tools cuda:libstoke-cuda)
  string(REPLACE ":" ";" component_package ${component_package})
  list(GET component_package 0 component)
  list(GET component_package 1 package)
  if(component STREQUAL "cuda" AND NOT STOKE_HAVE_CUDA)
    continue()
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}
          RENAME copyright COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME stoke)
set(CPACK_PACKAGE_VENDOR stoke)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "stoke maintainers <maintainers@users.noreply.a-seed-4483abb7.example>")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
if(STOKE_HAVE_CUDA)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
endif()

set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
# Architecture: dpkg --print-architecture (amd64 on the line PCs).
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from dpkg-shlibdeps (the Debian packages that own the libraries each
# binary links), plus the package's own components below. CPack runs it with
# --ignore-missing-info: a library no Debian package owns (libstoke.so.* in
# the build tree, found through the private folder; CUDA from NVIDIA's .run
# installer) adds no Depends, so those are stated explicitly or in the
# description.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/lib)
# DEBIAN/shlibs for libstoke.so.<major>.<minor>, so that a package built
# against it gets "libstoke (= <version>)" from dpkg-shlibdeps in turn.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)  # "libstoke (= <version>)" from *_DEPENDS

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libstoke)
# libstoke links OpenBLAS's pthread build by its folder (RUNPATH; why:
# lib/backend/module.cmake), but OpenBLAS's shlibs name only libopenblas0,
# which any of its three builds satisfies.
get_target_property(stoke_install_rpath stoke INSTALL_RPATH)
if(stoke_install_rpath MATCHES "openblas-pthread")
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS libopenblas0-pthread)
endif()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "embeddable C++20 training runtime for inspection conv nets
libstoke.so: device selection, pooled device memory, a oneTBB/xsimd image
pipeline, pinned double-buffered uploads, a CPU backend (oneDNN, OpenBLAS)
and the C ABI (stoke.h). The CUDA backend is the separate libstoke-cuda.")

set(CPACK_COMPONENT_DEV_DEPENDS runtime)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libstoke-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "stoke training runtime: development files
The public headers (include/stoke, standard library only), the libstoke.so
link, the CMake package (find_package(stoke), target stoke::stoke) and the
pkg-config file stoke.pc.")

set(CPACK_COMPONENT_TOOLS_DEPENDS runtime)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME stoke-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
    "stoke training runtime: command-line programs
stoke (dataset, train, eval, predict, export, import, audit, info, bench),
stoke-info and stoke-bench.")

if(STOKE_HAVE_CUDA)
  string(REGEX MATCH "^[0-9]+" stoke_cudnn_major "${CUDNN_VERSION}")
  get_target_property(stoke_cuda_dirs stoke_cuda INSTALL_RPATH)
  list(REMOVE_ITEM stoke_cuda_dirs "$ORIGIN")
  list(JOIN stoke_cuda_dirs ", " stoke_cuda_dirs)
  set(CPACK_COMPONENT_CUDA_DEPENDS runtime)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME libstoke-cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION libs)
  # NVIDIA's .run installer registers no Debian package, so dpkg-shlibdeps
  # finds no owner for cudart, cuBLAS, NVRTC or cuDNN and Depends names only
  # libstoke and the plugin's other libraries; with CUDA from Debian packages
  # that carry shlibs, dpkg-shlibdeps adds them.
  set(CPACK_DEBIAN_CUDA_DESCRIPTION
      "stoke training runtime: the CUDA backend plugin
libstoke_cuda.so, which libstoke loads at run time (a missing or unloadable
plugin means running on the CPU). Not in Depends, to be installed apart: the
NVIDIA driver, CUDA ${CUDAToolkit_VERSION_MAJOR} (cudart, cuBLAS, NVRTC) and cuDNN ${stoke_cudnn_major}. The plugin looks
for them where they were at build time, then on the loader path:
${stoke_cuda_dirs}.")
endif()

include(CPack)
