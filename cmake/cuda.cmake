# The CUDA backend: detection at configure time, and the libraries that hold the CUDA code.
#
#   cmake -S . -B build -DSL_CUDA=AUTO                  # default: on when the toolkit is complete
#   cmake -S . -B build -DSL_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90   # fail when anything is missing
#   cmake -S . -B build -DSL_CUDA=OFF                   # CPU only (sanitizer builds use this)
#
# The backend needs the CUDA toolkit (nvcc and the runtime), cuBLASLt and cuDNN (cudnn.h and
# libcudnn). AUTO enables it when all are found and otherwise says why in one status line. When it
# is on, SL_HAVE_CUDA is TRUE here and targets that link the CUDA libraries see -DSL_HAVE_CUDA=1.
#
# CUDA code lives in `cuda/` subfolders of the layers (src/core/cuda, src/exec/cuda, src/ops/cuda).
# The layer libraries never glob those folders; sl_cuda_libraries() (called from src/) builds them
# into libraries that keep the layer order:
#   sl_core_cuda -> sl_core, CUDA runtime (static);  sl_core_cuda_libs -> sl_core_cuda, cuDNN (cuBLASLt by dlopen)
#   sl_ops_cuda -> sl_ops, sl_core_cuda_libs;  sl_exec_cuda -> sl_exec, sl_ops_cuda, sl_core_cuda
# Only the .cu files go through nvcc; keep them few and free of heavy headers.

set(SL_CUDA AUTO CACHE STRING "CUDA backend: AUTO (when CUDA, cuDNN and cuBLASLt are found), ON, OFF")
set_property(CACHE SL_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${SL_CUDA}" sl_cuda_mode)
if(NOT sl_cuda_mode STREQUAL "AUTO")
  # Any CMake boolean: ON/YES/TRUE/1 or OFF/NO/FALSE/0.
  if(SL_CUDA)
    set(sl_cuda_mode ON)
  else()
    set(sl_cuda_mode OFF)
  endif()
endif()

set(SL_HAVE_CUDA FALSE)
if(NOT sl_cuda_mode STREQUAL "OFF")
  set(sl_cuda_missing "")
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND OR NOT CUDAToolkit_NVCC_EXECUTABLE)
    list(APPEND sl_cuda_missing "the CUDA toolkit (nvcc)")
  else()
    if(NOT TARGET CUDA::cublasLt)
      list(APPEND sl_cuda_missing "cuBLASLt")
    endif()
    find_path(SL_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_ROOT
              PATH_SUFFIXES include)
    find_library(SL_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ENV CUDNN_ROOT
                 PATH_SUFFIXES lib lib64)
    if(NOT SL_CUDNN_INCLUDE_DIR OR NOT SL_CUDNN_LIBRARY)
      list(APPEND sl_cuda_missing "cuDNN (cudnn.h and libcudnn)")
    endif()
  endif()
  if(sl_cuda_missing)
    string(REPLACE ";" ", " sl_cuda_missing "${sl_cuda_missing}")
    if(sl_cuda_mode STREQUAL "ON")
      message(FATAL_ERROR "SL_CUDA=ON but not found: ${sl_cuda_missing}. Install them or set CUDAToolkit_ROOT "
                          "/ CUDNN_ROOT, or configure with -DSL_CUDA=OFF.")
    endif()
    message(STATUS "CUDA backend: off (not found: ${sl_cuda_missing})")
  else()
    set(SL_HAVE_CUDA TRUE)
  endif()
endif()

if(SL_HAVE_CUDA)
  # Hopper (H100/H200) unless told otherwise; compile for one architecture to keep nvcc time and
  # binaries small.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  if(CCACHE_PROGRAM)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  endif()
  enable_language(CUDA)
  # C++17 for device code: the .cu files include only ops/cuda/launch.h, and CMake before 3.26 has
  # no C++20 flag for nvcc.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)
  add_library(sl_cudnn UNKNOWN IMPORTED)
  set_target_properties(sl_cudnn PROPERTIES IMPORTED_LOCATION ${SL_CUDNN_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${SL_CUDNN_INCLUDE_DIR})
  message(STATUS "CUDA backend: on (CUDA ${CUDAToolkit_VERSION}, cuDNN ${SL_CUDNN_LIBRARY}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
endif()

# Builds the CUDA libraries from the layers' cuda/ folders. Call once from src/, after the layers.
# cuDNN's small front library is linked (it loads its engines itself); cuBLASLt is loaded with
# dlopen on first use; the device layer needs just the CUDA runtime and cuDNN's front library.
function(sl_cuda_libraries)
  set(src ${CMAKE_SOURCE_DIR}/src)
  add_library(sl_core_cuda STATIC ${src}/core/cuda/cuda_status.cc)
  # The CUDA runtime linked statically: a binary then needs only the driver (and, for kernels,
  # cuDNN and cuBLASLt) on the machine it runs on.
  target_link_libraries(sl_core_cuda PUBLIC sl_core CUDA::cudart_static)
  target_compile_definitions(sl_core_cuda PUBLIC SL_HAVE_CUDA=1)
  # cudnn.h and cublasLt.h are included by cuda_status.h, hence the include path for everyone.
  target_include_directories(sl_core_cuda PUBLIC ${SL_CUDNN_INCLUDE_DIR})
  # cuBLASLt is loaded on first use (core/cuda/cublaslt_loader.cc), not linked: relocating its
  # 500 MB at every program start costs more than a second on a busy machine.
  add_library(sl_core_cuda_libs STATIC ${src}/core/cuda/library_status.cc ${src}/core/cuda/cublaslt_loader.cc)
  target_link_libraries(sl_core_cuda_libs PUBLIC sl_core_cuda sl_cudnn ${CMAKE_DL_LIBS})

  file(GLOB ops_srcs CONFIGURE_DEPENDS ${src}/ops/cuda/*.cc ${src}/ops/cuda/*.cu)
  add_library(sl_ops_cuda STATIC ${ops_srcs})
  target_link_libraries(sl_ops_cuda PUBLIC sl_ops sl_core_cuda_libs)
  # Device code: no fast math (Gelu and Softmax are compared with the reference kernels); -lineinfo
  # maps profiler samples to source lines without slowing the code.
  target_compile_options(sl_ops_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)

  file(GLOB exec_srcs CONFIGURE_DEPENDS ${src}/exec/cuda/*.cc)
  add_library(sl_exec_cuda STATIC ${exec_srcs})
  # The executor (exec/cuda/executor.cc) runs plans; the backend (exec/cuda/backend.cc) also
  # names the CUDA kernels plans are made from. exec/cuda/builtin_backends.cc replaces sl_exec's
  # exec/builtin_backends.cc (src/CMakeLists.txt leaves that one out in CUDA builds).
  target_link_libraries(sl_exec_cuda PUBLIC sl_exec sl_ops_cuda sl_core_cuda sl_cudnn)

  foreach(t sl_core_cuda sl_core_cuda_libs sl_ops_cuda sl_exec_cuda)
    add_dependencies(${t} check_layers)
  endforeach()
endfunction()
