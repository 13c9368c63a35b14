# The public library einjit::einjit, and the CMake package, pkg-config file and CLI that
# `cmake --install` puts under the prefix.
#
# einjit::einjit is one shared library (libeinjit.so) made of the objects of the internal
# static libraries (dsl, grad, codegen, runtime). A shared library keeps LLVM, oneTBB and the
# CUDA headers private: they are linked into it, so a user's project needs neither their
# headers nor find_dependency() for them, and its interface carries only the public include
# directory and C++20. The internal static libraries stay what einjit's own tests, benchmarks
# and CLI link (they see the internals); they are compiled position-independent for this.
include(GNUInstallDirs)
set(EINJIT_INTERNAL_LIBRARIES einjit_dsl einjit_grad einjit_codegen einjit_runtime)
if(TARGET einjit_codegen_llvm)
  list(APPEND EINJIT_INTERNAL_LIBRARIES einjit_codegen_llvm)
endif()
set_target_properties(${EINJIT_INTERNAL_LIBRARIES} PROPERTIES POSITION_INDEPENDENT_CODE ON)

set(EINJIT_LIBRARY_OBJECTS)
foreach(lib IN LISTS EINJIT_INTERNAL_LIBRARIES)
  list(APPEND EINJIT_LIBRARY_OBJECTS $<TARGET_OBJECTS:${lib}>)
endforeach()
add_library(einjit_library SHARED ${EINJIT_LIBRARY_OBJECTS})
add_library(einjit::einjit ALIAS einjit_library)
set_target_properties(einjit_library PROPERTIES
  OUTPUT_NAME einjit EXPORT_NAME einjit
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
target_include_directories(einjit_library INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(einjit_library INTERFACE cxx_std_20)
# The objects' own link dependencies, private: what einjit_runtime links, minus einjit's own
# static libraries (their objects are inside).
target_link_libraries(einjit_library PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
if(EINJIT_HAVE_LLVM)
  target_link_libraries(einjit_library PRIVATE LLVM)
endif()
if(EINJIT_HAVE_TBB)
  target_link_libraries(einjit_library PRIVATE TBB::tbb)
endif()
if(EINJIT_SANITIZE)
  target_link_options(einjit_library PRIVATE -fsanitize=address,undefined)
endif()
# No undefined symbols left for the user's link to find.
target_link_options(einjit_library PRIVATE LINKER:--no-undefined)
# What comes from archives (the C++ runtime, where the toolchain has only libstdc++.a, as the
# GPU machine's has) stays private: exported, it would bind to the libstdc++.so of the user's
# process and the two runtimes' locale tables would disagree (python/src/exports.map).
target_link_options(einjit_library PRIVATE LINKER:--exclude-libs,ALL)

if(NOT EINJIT_INSTALL)
  return()
endif()
include(CMakePackageConfigHelpers)
set(EINJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/einjit)

install(TARGETS einjit_library EXPORT einjitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS einjit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/einjit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT einjitTargets NAMESPACE einjit:: DESTINATION ${EINJIT_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/einjitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/einjitConfig.cmake INSTALL_DESTINATION ${EINJIT_CMAKE_DIR})
# 0.x: a minor version may break the interface.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/einjitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/einjitConfig.cmake ${PROJECT_BINARY_DIR}/einjitConfigVersion.cmake
  DESTINATION ${EINJIT_CMAKE_DIR})

# Relocatable: the prefix is found from the .pc file's own place (cmake --install --prefix P).
file(RELATIVE_PATH EINJIT_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${PROJECT_SOURCE_DIR}/cmake/einjit.pc.in ${PROJECT_BINARY_DIR}/einjit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/einjit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
