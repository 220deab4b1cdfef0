# Which libtorch the data plane links (included by the top-level CMakeLists.txt).
#
# SWARM_TORCH_CMAKE_PREFIX set (what scripts/build.sh does): PyTorch's own libtorch from the pinned
# PyPI wheel that scripts/install-torch.sh installs; the value is that install's
# torch.utils.cmake_prefix_path. PyPI's wheel is a CUDA build, and its TorchConfig.cmake enables
# CMake's CUDA language (nvcc and the CUDA toolkit would have to be installed just to configure),
# so for this CPU build the project defines the target itself: libtorch_cpu.so + libc10.so and the
# wheel's headers, nothing CUDA. (libtorch_cpu.so finds the libcudart/libcupti it loads through its
# own RPATH; scripts/install-torch.sh says why they are there.)
#
# SWARM_TORCH_CMAKE_PREFIX empty: find_package(Torch), i.e. Debian's libtorch 1.13 (libtorch-dev),
# or any libtorch on CMAKE_PREFIX_PATH with a usable TorchConfig.cmake (the CUDA image's build,
# which installs nvcc for it).
#
# Either way: TORCH_LIBRARIES (what targets link), Torch_VERSION, and SWARM_TORCH_SOURCE for the
# configure summary.
set(SWARM_TORCH_CMAKE_PREFIX "" CACHE PATH
    "torch.utils.cmake_prefix_path of a PyPI torch install (scripts/install-torch.sh); empty: find_package(Torch)")

if(SWARM_TORCH_CMAKE_PREFIX)
  get_filename_component(_swarm_torch_root "${SWARM_TORCH_CMAKE_PREFIX}/../.." ABSOLUTE)
  foreach(_f lib/libtorch_cpu.so lib/libc10.so include/torch/csrc/api/include/torch/torch.h version.py)
    if(NOT EXISTS "${_swarm_torch_root}/${_f}")
      message(FATAL_ERROR "SWARM_TORCH_CMAKE_PREFIX=${SWARM_TORCH_CMAKE_PREFIX}: no ${_f} under "
                          "${_swarm_torch_root} (is it torch.utils.cmake_prefix_path of a PyTorch "
                          "install? scripts/install-torch.sh prints one)")
    endif()
  endforeach()
  file(STRINGS "${_swarm_torch_root}/version.py" _swarm_torch_version_line REGEX "^__version__ *=")
  string(REGEX REPLACE "^__version__ *= *'([0-9.]+).*$" "\\1" Torch_VERSION "${_swarm_torch_version_line}")
  if(NOT Torch_VERSION MATCHES "^[0-9]+\\.[0-9]+")
    message(FATAL_ERROR "SWARM_TORCH_CMAKE_PREFIX: cannot read the version from ${_swarm_torch_root}/version.py "
                        "(line: '${_swarm_torch_version_line}')")
  endif()
  add_library(swarm_libc10 SHARED IMPORTED GLOBAL)
  set_target_properties(swarm_libc10 PROPERTIES IMPORTED_LOCATION "${_swarm_torch_root}/lib/libc10.so")
  add_library(swarm_libtorch_cpu SHARED IMPORTED GLOBAL)
  set_target_properties(swarm_libtorch_cpu PROPERTIES IMPORTED_LOCATION "${_swarm_torch_root}/lib/libtorch_cpu.so")
  add_library(swarm_torch INTERFACE)
  target_include_directories(swarm_torch SYSTEM INTERFACE
    "${_swarm_torch_root}/include" "${_swarm_torch_root}/include/torch/csrc/api/include")
  # PyPI's wheels since 2.7 use the new libstdc++ ABI, as Debian's libraries do.
  target_compile_definitions(swarm_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  target_link_libraries(swarm_torch INTERFACE swarm_libtorch_cpu swarm_libc10 Threads::Threads)
  set(TORCH_LIBRARIES swarm_torch)
  set(SWARM_TORCH_SOURCE "PyPI wheel at ${_swarm_torch_root} (libtorch_cpu + libc10)")
else()
  find_package(Torch REQUIRED)
  set(SWARM_TORCH_SOURCE "find_package(Torch) at ${Torch_DIR}")
endif()
message(STATUS "libtorch ${Torch_VERSION}: ${SWARM_TORCH_SOURCE}")
