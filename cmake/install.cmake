# What `cmake --install BUILD --prefix P` puts under P (GNUInstallDirs):
#   include/thdpack/...                          public headers (and the generated version.hpp)
#   lib/libthdpack.a, lib/libthdpack_mpi.a       thdpack::thdpack, thdpack::mpi (with MPI)
#   bin/thdpack                                  the CLI
#   lib/cmake/thdpack/thdpackConfig.cmake, thdpackConfigVersion.cmake, thdpackTargets*.cmake
#   lib/pkgconfig/thdpack.pc, thdpack-mpi.pc (with MPI)
# and, only with `--component python`, the Python package (python/CMakeLists.txt).
# Everything is relocatable: the CMake and pkg-config files find the prefix from where they are.
include(CMakePackageConfigHelpers)

set(thdpack_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/thdpack)
# Installed programs keep finding shared libraries outside the system paths (an MPI in /opt).
set_target_properties(thdpack PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

# Two export sets, so that a consumer without MPI can still use thdpack::thdpack.
install(TARGETS thdpack_lib thdpack EXPORT thdpackTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT thdpackTargets NAMESPACE thdpack:: DESTINATION ${thdpack_cmake_dir})
if(THDPACK_WITH_MPI)
  install(TARGETS thdpack_mpi EXPORT thdpackMpiTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT thdpackMpiTargets NAMESPACE thdpack:: DESTINATION ${thdpack_cmake_dir})
endif()

# Headers; the MPI backend's only when it is built (it includes <mpi.h>).
set(exclude_mpi_header)
if(NOT THDPACK_WITH_MPI)
  set(exclude_mpi_header PATTERN mpi_communicator.hpp EXCLUDE)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/thdpack ${PROJECT_BINARY_DIR}/include/thdpack
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp"
        ${exclude_mpi_header})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/thdpackConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/thdpackConfig.cmake INSTALL_DESTINATION ${thdpack_cmake_dir})
# 0.x: a minor release may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/thdpackConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/thdpackConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/thdpackConfigVersion.cmake
        DESTINATION ${thdpack_cmake_dir})

# pkg-config: the prefix is found relative to the .pc file, so `--prefix` at install time works.
file(RELATIVE_PATH pc_prefix_from_pcfiledir ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" pc_prefix_from_pcfiledir "${pc_prefix_from_pcfiledir}")
set(pc_files thdpack)
if(THDPACK_WITH_MPI)
  list(APPEND pc_files thdpack-mpi)
endif()
foreach(pc IN LISTS pc_files)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc
                 @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
