# CUDA backend: Hopper only (sm_90a for wgmma); cuBLAS/cuBLASLt from /usr/local/cuda.
find_package(CUDAToolkit REQUIRED)
# CMake 3.25 does not know that nvcc 13 speaks C++20: teach it the flag.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_ARCHITECTURES OFF)
file(GLOB_RECURSE cuda_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu
     ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cc)
if(NOT cuda_srcs)
  set(cuda_srcs ${CMAKE_SOURCE_DIR}/cmake/empty.cc)
endif()
add_library(vireo_cuda STATIC ${cuda_srcs})
target_include_directories(vireo_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_compile_options(vireo_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo>)

target_link_libraries(vireo_cuda PUBLIC vireo_backend CUDA::cudart_static CUDA::cublas CUDA::cublasLt)
