# Install rules, the CMake package and uringpipe.pc (issue 7).
#
# Installed: the public headers (with the generated version.h), the shared
# library (SONAME liburingpipe.so.<major>; exports pinned by
# core/uringpipe.map), the static library, uringpipe.pc, and the package
# files under <libdir>/cmake/uringpipe:
#   find_package(uringpipe)  ->  uringpipe::uringpipe         (shared)
#                                uringpipe::uringpipe_static  (static)
# The libraries link liburing and libnuma PRIVATE, the shared one jemalloc
# too. The shared library carries them as DT_NEEDED, so its consumers need
# nothing else; the static one (built without jemalloc, so that it never
# brings another malloc into the host: CMakeLists.txt) exports them as
# $<LINK_ONLY:...> and uringpipeConfig.cmake finds them again (pkg-config),
# the way zstd's and nng's configs do. Docs, examples and the changelog go
# to <docdir> (share/doc/uringpipe).
#
# Components, one per Debian package (cmake/UpPackage.cmake): lib (the
# shared library), dev (headers, the .so link, the static library, .pc,
# CMake package, man3/man7, docs, examples), tools (tools/: uringpipe-cat).
include(CMakePackageConfigHelpers)

set(UP_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/uringpipe)

# libnuma comes from find_library as an absolute path, which would be
# exported verbatim into the installed targets file: keep the path for the
# build tree and name the pkg-config target (recreated by the config) for
# the installed one.
if(UP_WITH_NUMA AND NUMA_LIBRARY)
  get_target_property(_up_ill uringpipe_static INTERFACE_LINK_LIBRARIES)
  if(_up_ill)
    # CMake stores a plain file PRIVATE dependency unwrapped, a target as
    # $<LINK_ONLY:...>; handle both.
    set(_up_new "")
    foreach(_up_item IN LISTS _up_ill)
      if(_up_item STREQUAL "${NUMA_LIBRARY}" OR _up_item STREQUAL "$<LINK_ONLY:${NUMA_LIBRARY}>")
        list(APPEND _up_new "$<BUILD_INTERFACE:${_up_item}>"
          "$<INSTALL_INTERFACE:$<LINK_ONLY:PkgConfig::NUMA>>")
      else()
        list(APPEND _up_new "${_up_item}")
      endif()
    endforeach()
    set_property(TARGET uringpipe_static PROPERTY INTERFACE_LINK_LIBRARIES "${_up_new}")
    unset(_up_new)
    unset(_up_item)
  endif()
  unset(_up_ill)
endif()

install(TARGETS uringpipe uringpipe_static
  EXPORT uringpipeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT lib)
install(FILES ${PROJECT_SOURCE_DIR}/include/uringpipe.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/include/uringpipe/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/uringpipe COMPONENT dev)
# up_uring_prep_poll() exists only in a build with liburing.
if(UP_WITH_URING)
  install(FILES ${PROJECT_SOURCE_DIR}/include/uringpipe/uring.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/uringpipe COMPONENT dev)
endif()

install(EXPORT uringpipeTargets
  NAMESPACE uringpipe::
  FILE uringpipeTargets.cmake
  DESTINATION ${UP_CMAKE_DIR} COMPONENT dev)

# Booleans for the config template: which private dependencies of the
# static library to find again (it never links jemalloc).
foreach(_dep URING NUMA)
  if(UP_WITH_${_dep})
    set(UP_CONFIG_WITH_${_dep} ON)
  else()
    set(UP_CONFIG_WITH_${_dep} OFF)
  endif()
endforeach()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/uringpipeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/uringpipeConfig.cmake
  INSTALL_DESTINATION ${UP_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/uringpipeConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/uringpipeConfig.cmake
  ${PROJECT_BINARY_DIR}/uringpipeConfigVersion.cmake
  DESTINATION ${UP_CMAKE_DIR} COMPONENT dev)

# uringpipe.pc. Relocatable: paths are relative to the .pc file itself
# (${pcfiledir}), so `cmake --install --prefix X` and DESTDIR both work
# without reconfiguring; absolute install dirs are used as given.
set(UP_PC_REQUIRES_PRIVATE "")
if(UP_WITH_URING)
  list(APPEND UP_PC_REQUIRES_PRIVATE liburing)
endif()
if(UP_WITH_NUMA)
  list(APPEND UP_PC_REQUIRES_PRIVATE numa)
endif()
# No jemalloc: the static library is built without it, and the shared
# library's own dependencies are not its consumers' business.
string(REPLACE ";" ", " UP_PC_REQUIRES_PRIVATE "${UP_PC_REQUIRES_PRIVATE}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(UP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(UP_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH _up_rel "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
  string(REGEX REPLACE "/$" "" _up_rel "${_up_rel}")
  set(UP_PC_PREFIX "\${pcfiledir}/${_up_rel}")
  set(UP_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  unset(_up_rel)
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(UP_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(UP_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/uringpipe.pc.in
  ${PROJECT_BINARY_DIR}/uringpipe.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/uringpipe.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# Man pages: uringpipe(7) and one page per call or family in man3; the
# aliases are `.so` stubs (as liburing ships them).
file(GLOB UP_MAN3 CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/*.3)
file(GLOB UP_MAN7 CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/man/*.7)
install(FILES ${UP_MAN3} DESTINATION ${CMAKE_INSTALL_MANDIR}/man3 COMPONENT dev)
install(FILES ${UP_MAN7} DESTINATION ${CMAKE_INSTALL_MANDIR}/man7 COMPONENT dev)

# Docs under <docdir> (share/doc/uringpipe): the README, the design and its
# notes, the changelog, the licence, and the example programs as sources
# (with the consumer, a CMake project that builds against the installed
# package: examples/consumer/CMakeLists.txt).
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/docs/DESIGN.md
  ${PROJECT_SOURCE_DIR}/docs/DESIGN-NOTES.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dev)
file(GLOB UP_EXAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.c)
install(FILES ${UP_EXAMPLES} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/consumer
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT dev)
