# The Debian packages, built by CPack from the install components
# (cmake/UpInstall.cmake):
#   cmake -S . -B build-deb -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
#     -DUP_BUILD_TESTS=OFF -DUP_BUILD_EXAMPLES=OFF
#   cmake --build build-deb --target package     (or: cd build-deb && cpack -G DEB)
# gives three packages, as Debian splits a library:
#   liburingpipe0     the shared library (lib); Depends from dpkg-shlibdeps,
#                     and a shlibs file of its own
#   liburingpipe-dev  headers, the .so link, the static library, uringpipe.pc,
#                     the CMake package, man3/man7, docs and examples (dev);
#                     Depends on liburingpipe0 of the same version and on the
#                     -dev packages the static library and the .pc's
#                     Requires.private name (liburing-dev, libnuma-dev)
#   uringpipe-tools   uringpipe-cat and uringpipe-cat(1) (tools); it links the
#                     static library, so it needs only what dpkg-shlibdeps says
# Each package carries /usr/share/doc/<package>/copyright (the LICENSE),
# installed only by the component installs CPack runs (EXCLUDE_FROM_ALL), not
# by a plain `cmake --install`. dpkg-shlibdeps comes with dpkg-dev.
if(NOT CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  return()
endif()

set(_up_deb_lib liburingpipe${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${_up_deb_lib})
set(CPACK_DEBIAN_DEV_PACKAGE_NAME liburingpipe-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME uringpipe-tools)
foreach(_c LIB DEV TOOLS)
  string(TOLOWER ${_c} _comp)
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CPACK_DEBIAN_${_c}_PACKAGE_NAME}
    RENAME copyright COMPONENT ${_comp} EXCLUDE_FROM_ALL)
endforeach()
unset(_c)
unset(_comp)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME uringpipe)
set(CPACK_PACKAGE_VENDOR "the uringpipe authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "shared-memory pipe woken through io_uring")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL lib dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "the uringpipe authors")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)

set(_up_deb_dev_deps "${_up_deb_lib} (= ${PROJECT_VERSION})")
if(UP_WITH_URING)
  string(APPEND _up_deb_dev_deps ", liburing-dev")
endif()
if(UP_WITH_NUMA)
  string(APPEND _up_deb_dev_deps ", libnuma-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_up_deb_dev_deps}")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "${_up_deb_lib}")
unset(_up_deb_dev_deps)

set(CPACK_DEBIAN_LIB_DESCRIPTION "shared-memory pipe woken through io_uring (library)
 uringpipe is a byte-stream pipe with the semantics of pipe(7) that threads
 or processes share through a sealed memfd. A busy writer and reader move
 data without system calls; sleeping and waking go through io_uring, with a
 futex(2) fallback.
 .
 This package holds the shared library.")
set(CPACK_DEBIAN_DEV_DESCRIPTION "shared-memory pipe woken through io_uring (development files)
 uringpipe is a byte-stream pipe with the semantics of pipe(7) that threads
 or processes share through a sealed memfd.
 .
 This package holds the headers, the static library (built without jemalloc,
 so that it never replaces the host's malloc), pkg-config and CMake package
 files, the man pages, the design documents and example programs.")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "cat and pv with a shared-memory pipe in the middle
 uringpipe-cat copies its inputs to stdout through a uringpipe, with a
 progress meter, and compares uringpipe with kernel pipes (--bench).")

include(CPack)
