# CMake package for tilec, the ahead-of-time compiler for .tile GPU kernels.
#
#   find_package(Tilec CONFIG REQUIRED)       # -DTilec_DIR=$(tilec --cmake-dir), or tilec on PATH
#   tilec_add_kernel(my_kernels SOURCES gemm.tile softmax.tile TARGETS sm80 sm90 DEFINES block_M=64)
#   target_link_libraries(my_app PRIVATE my_kernels)   # #include "gemm.h" and call gemm_launch(...)
#
# Variables read:
#   TILEC_EXECUTABLE     the tilec command (default: `tilec` found on PATH, next to this package's
#                        Python, or `python -m tilec`); a list is allowed ("python3;-m;tilec").
#   TILEC_PREBUILT_DIR   use headers generated elsewhere instead of running tilec: each
#                        tilec_add_kernel(NAME SOURCES x.tile) takes ${TILEC_PREBUILT_DIR}/NAME/x.h
#                        (the layout of <build>/tilec/ after a normal build). For machines without
#                        tilec's Python dependencies, such as a GPU box that only builds and runs.
# Variables set: Tilec_FOUND, Tilec_VERSION, TILEC_EXECUTABLE, Tilec_CMAKE_DIR.
# See docs/deploy.md.

include_guard(GLOBAL)
cmake_minimum_required(VERSION 3.20)

set(Tilec_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
include("${CMAKE_CURRENT_LIST_DIR}/TilecConfigVersion.cmake")
set(Tilec_VERSION "${PACKAGE_VERSION}")

if(NOT TILEC_PREBUILT_DIR AND NOT TILEC_EXECUTABLE)
  # An installed tilec: its script is in the bin/ of the environment whose site-packages holds us.
  get_filename_component(_tilec_env_bin "${CMAKE_CURRENT_LIST_DIR}/../../../../../bin" ABSOLUTE)
  find_program(TILEC_EXECUTABLE_PATH tilec HINTS "${_tilec_env_bin}" DOC "the tilec compiler")
  if(TILEC_EXECUTABLE_PATH)
    set(TILEC_EXECUTABLE "${TILEC_EXECUTABLE_PATH}" CACHE STRING "the tilec command")
  else()
    # This directory is <site-packages>/tilec/cmake: run that package with a Python that can import it.
    get_filename_component(_tilec_pkg_parent "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      execute_process(COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${_tilec_pkg_parent}"
                              "${Python3_EXECUTABLE}" -c "import tilec.driver"
                      RESULT_VARIABLE _tilec_rc OUTPUT_QUIET ERROR_QUIET)
      if(_tilec_rc EQUAL 0)
        set(TILEC_EXECUTABLE "${CMAKE_COMMAND};-E;env;PYTHONPATH=${_tilec_pkg_parent};${Python3_EXECUTABLE};-m;tilec"
            CACHE STRING "the tilec command")
      endif()
    endif()
  endif()
  if(NOT TILEC_EXECUTABLE)
    set(Tilec_FOUND FALSE)
    set(Tilec_NOT_FOUND_MESSAGE "the tilec command was not found: put it on PATH, set TILEC_EXECUTABLE, or set "
        "TILEC_PREBUILT_DIR to a directory of pre-generated headers")
    return()
  endif()
endif()

include("${CMAKE_CURRENT_LIST_DIR}/TilecFunctions.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/TilecPackage.cmake")
set(Tilec_FOUND TRUE)
