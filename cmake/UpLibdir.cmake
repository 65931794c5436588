# The default libdir on Debian and its derivatives: lib/<multiarch>
# (lib/x86_64-linux-gnu) for every prefix, not only for a configured
# CMAKE_INSTALL_PREFIX=/usr as GNUInstallDirs decides it. The prefix is
# often given only at install time (`cmake --install build --prefix /usr`,
# CPack's /usr), when the relative libdir is already fixed; GNUInstallDirs
# would have chosen `lib` for the default /usr/local then. Debian's loader
# (/etc/ld.so.conf.d/<multiarch>.conf) and pkg-config search
# /usr/local/lib/<multiarch> too, so a /usr/local install still works.
# Included before GNUInstallDirs; -DCMAKE_INSTALL_LIBDIR=... always wins, and
# other systems keep GNUInstallDirs' choice (lib64 or lib).
if(NOT DEFINED CMAKE_INSTALL_LIBDIR AND CMAKE_SYSTEM_NAME STREQUAL "Linux"
    AND NOT CMAKE_CROSSCOMPILING AND CMAKE_LIBRARY_ARCHITECTURE
    AND EXISTS "/etc/debian_version")
  set(CMAKE_INSTALL_LIBDIR "lib/${CMAKE_LIBRARY_ARCHITECTURE}" CACHE PATH
    "Object code libraries (lib/<multiarch> on Debian for every prefix)")
endif()
