# `cmake --install build --prefix P`: the `lucid` command, the static library lucid_core (exported
# as lucid::lucid), the inference header lucid/lucid.h and a CMake package, so that another project
# does find_package(lucid) and links lucid::lucid (docs/library.md).
include(CMakePackageConfigHelpers)

set_target_properties(lucid_core PROPERTIES EXPORT_NAME lucid)
# The installed command finds LibTorch's shared libraries where it was linked against them.
get_filename_component(LUCID_TORCH_LIB_DIR "${TORCH_INSTALL_PREFIX}/lib" REALPATH)
set_target_properties(lucid PROPERTIES INSTALL_RPATH "${LUCID_TORCH_LIB_DIR}" INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS lucid RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS lucid_core EXPORT lucidTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES src/lucid/lucid.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lucid)

set(LUCID_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lucid)
install(EXPORT lucidTargets NAMESPACE lucid:: DESTINATION ${LUCID_CMAKE_DIR})
# Defaults the package's config starts from, overridable by the consumer: the LibTorch this build
# used (the real path, so that a venv link still names the same wheel) and its CUDA architectures.
get_filename_component(LUCID_TORCH_DIR "${Torch_DIR}" REALPATH)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/lucidConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/lucidConfig.cmake ${CMAKE_BINARY_DIR}/lucidConfigVersion.cmake
        DESTINATION ${LUCID_CMAKE_DIR})

# Once the whole project is read: every PkgConfig:: target lucid_core links must be named in
# LUCID_PKG_CONFIG_DEPS, or the installed package could not recreate it; then the config is written.
function(lucid_write_package_config)
  get_target_property(libs lucid_core LINK_LIBRARIES)
  foreach(lib ${libs})
    if(lib MATCHES "^PkgConfig::(.+)$")
      set(found ${LUCID_PKG_CONFIG_DEPS})
      list(FILTER found INCLUDE REGEX "^${CMAKE_MATCH_1}=")
      if(NOT found)
        message(FATAL_ERROR "lucid_core links ${lib}: add \"${CMAKE_MATCH_1}=<modules, comma-separated>\" to "
                            "LUCID_PKG_CONFIG_DEPS so that the installed package finds it")
      endif()
    endif()
  endforeach()
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/lucidConfig.cmake.in ${CMAKE_BINARY_DIR}/lucidConfig.cmake
                                INSTALL_DESTINATION ${LUCID_CMAKE_DIR})
endfunction()
cmake_language(DEFER CALL lucid_write_package_config)
