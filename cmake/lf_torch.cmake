# Finds LibTorch from the PyPI torch wheel (the venv's, or whatever python3 has torch).
# Torch_DIR may also be given directly. Only targets that include torch headers link it.
if(NOT Torch_DIR AND NOT DEFINED ENV{Torch_DIR})
  set(_lf_python "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  if(NOT EXISTS ${_lf_python})
    find_program(_lf_python NAMES python3 REQUIRED)
  endif()
  execute_process(
    COMMAND ${_lf_python} -c "import torch; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _lf_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _lf_torch_rc)
  if(NOT _lf_torch_rc EQUAL 0)
    message(FATAL_ERROR "lorafleet: cannot import torch with ${_lf_python}; run scripts/install_deps.sh")
  endif()
  list(APPEND CMAKE_PREFIX_PATH ${_lf_torch_prefix})
endif()
# The wheel's TorchConfig looks for a CUDA toolkit when the wheel is a CUDA build; point it at
# the local one if present. Without one, LibTorch still links and runs on the CPU.
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda CACHE PATH "")
endif()
find_package(Torch REQUIRED)
message(STATUS "lorafleet: LibTorch ${Torch_VERSION} from ${Torch_DIR}")
