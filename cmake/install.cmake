# Installing: `cmake --install build --prefix PREFIX` puts
#   PREFIX/include/streamline/        the public headers (streamline.h, serving.h, pipeline.h),
#                                     under core/ the value types they use (Status, Tensor, ...) and
#                                     under exec/ the observer hooks
#   PREFIX/lib/libstreamline.so       every layer up to the runtime in one shared library
#   PREFIX/lib/cmake/streamline/      the CMake package: find_package(streamline) -> streamline::streamline
#   PREFIX/lib/pkgconfig/streamline.pc
# The layers stay static libraries inside the build; the shared library holds all of their code
# (whole archives), so a program needs no other streamline library and none of our build's
# include paths. tests/install/check_install.sh builds a program against the installed tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Public headers include only each other and these core headers, which include only the C++
# library and each other by sibling name ("allocator.h"), so they resolve the same in src/core/
# and in PREFIX/include/streamline/core/. scripts/check_layers.py checks both rules.
set(SL_PUBLIC_CORE_HEADERS allocator.h clock.h dtype.h plan_choices.h shape.h status.h tensor.h value.h)
# The observer hooks (exec/observer.h) are public too, installed as include/streamline/exec/.
set(SL_PUBLIC_EXEC_HEADERS observer.h)

set(sl_shared_layers sl_runtime sl_exec sl_plan sl_ops sl_graph sl_core)
if(SL_HAVE_CUDA)
  list(PREPEND sl_shared_layers sl_exec_cuda sl_ops_cuda sl_core_cuda_libs sl_core_cuda)
endif()
set(sl_whole_archives)
foreach(lib ${sl_shared_layers})
  list(APPEND sl_whole_archives $<TARGET_FILE:${lib}>)
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/generated/streamline_shared.cc
     "// The shared library's code is the layers' static libraries (cmake/install.cmake).\n")
add_library(sl_shared SHARED ${CMAKE_BINARY_DIR}/generated/streamline_shared.cc)
add_dependencies(sl_shared ${sl_shared_layers})
# Whole archives first (every object goes in), then the layers again for their own dependencies
# (oneDNN, ONNX, protobuf, libjpeg, libpng, OpenMP, cuDNN), which stay shared libraries.
target_link_libraries(sl_shared PRIVATE -Wl,--whole-archive ${sl_whole_archives} -Wl,--no-whole-archive
                                         ${sl_shared_layers})
target_include_directories(sl_shared INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(sl_shared INTERFACE cxx_std_20)
# The target is sl_shared (the CLI is `streamline`); installed, it is libstreamline.so and
# streamline::streamline.
set_target_properties(sl_shared PROPERTIES OUTPUT_NAME streamline EXPORT_NAME streamline VERSION ${PROJECT_VERSION}
                                           SOVERSION ${PROJECT_VERSION_MAJOR})

install(TARGETS sl_shared EXPORT streamline-targets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/streamline/streamline.h ${CMAKE_SOURCE_DIR}/include/streamline/serving.h
              ${CMAKE_SOURCE_DIR}/include/streamline/pipeline.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/streamline)
list(TRANSFORM SL_PUBLIC_CORE_HEADERS PREPEND ${CMAKE_SOURCE_DIR}/src/core/ OUTPUT_VARIABLE sl_core_header_files)
install(FILES ${sl_core_header_files} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/streamline/core)
list(TRANSFORM SL_PUBLIC_EXEC_HEADERS PREPEND ${CMAKE_SOURCE_DIR}/src/exec/ OUTPUT_VARIABLE sl_exec_header_files)
install(FILES ${sl_exec_header_files} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/streamline/exec)
install(EXPORT streamline-targets NAMESPACE streamline:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/streamline)
file(WRITE ${CMAKE_BINARY_DIR}/generated/streamline-config.cmake
     "include(\"\${CMAKE_CURRENT_LIST_DIR}/streamline-targets.cmake\")\n")
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/streamline-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/streamline-config.cmake
              ${CMAKE_BINARY_DIR}/generated/streamline-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/streamline)
# Relocatable: the prefix is found from the .pc file's own folder.
file(WRITE ${CMAKE_BINARY_DIR}/generated/streamline.pc
"prefix=\${pcfiledir}/../..
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}

Name: streamline
Description: ONNX inference runtime: load a model once, run it from many threads
Version: ${PROJECT_VERSION}
Cflags: -std=c++20 -I\${includedir}
Libs: -L\${libdir} -lstreamline
")
install(FILES ${CMAKE_BINARY_DIR}/generated/streamline.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
