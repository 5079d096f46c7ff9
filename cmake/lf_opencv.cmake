# OpenCV core/imgproc/imgcodecs from Debian's per-module -dev packages. Those packages ship no
# OpenCVConfig.cmake (only the full libopencv-dev does), so locate headers and libraries directly.
find_path(LF_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
foreach(mod core imgproc imgcodecs)
  find_library(LF_OPENCV_${mod}_LIB opencv_${mod} REQUIRED)
  if(NOT TARGET lf::opencv_${mod})
    add_library(lf::opencv_${mod} UNKNOWN IMPORTED)
    set_target_properties(lf::opencv_${mod} PROPERTIES
      IMPORTED_LOCATION ${LF_OPENCV_${mod}_LIB}
      INTERFACE_INCLUDE_DIRECTORIES ${LF_OPENCV_INCLUDE_DIR})
  endif()
endforeach()
set(LF_OPENCV_LIBS lf::opencv_core lf::opencv_imgproc lf::opencv_imgcodecs)
