# oneDNN as the target DNNL::dnnl.
#
# Debian's oneDNN is built with the OpenCL GPU runtime, and its CMake package config calls
# find_package(OpenCL REQUIRED), which needs the OpenCL headers and the libOpenCL.so link
# (ocl-icd-opencl-dev, only a Recommends of libdnnl-dev). streamline uses oneDNN's CPU engine
# alone and never includes OpenCL, so when OpenCL's development files are missing we find the
# library and its headers directly instead of failing the configure step. scripts/setup.sh
# installs ocl-icd-opencl-dev as well, so both paths stay exercised.
find_package(OpenCL QUIET)
if(OpenCL_FOUND)
  find_package(dnnl CONFIG QUIET)
endif()
if(NOT TARGET DNNL::dnnl)
  find_path(SL_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
  find_library(SL_DNNL_LIBRARY NAMES dnnl)
  if(NOT SL_DNNL_INCLUDE_DIR OR NOT SL_DNNL_LIBRARY)
    message(FATAL_ERROR
      "oneDNN not found (oneapi/dnnl/dnnl.hpp: ${SL_DNNL_INCLUDE_DIR}, libdnnl: ${SL_DNNL_LIBRARY}). "
      "On Debian: apt-get install libdnnl-dev ocl-icd-opencl-dev (or run scripts/setup.sh).")
  endif()
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES
    IMPORTED_LOCATION "${SL_DNNL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SL_DNNL_INCLUDE_DIR}")
  message(STATUS "oneDNN: ${SL_DNNL_LIBRARY} (found directly; OpenCL development files absent)")
endif()
