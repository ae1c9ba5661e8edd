# tilec_add_kernel(): compile .tile files into C launcher headers (or binaries) at build time.
#
#   tilec_add_kernel(<name>
#       SOURCES a.tile [b.tile ...]        one output per source: <stem>.h (or .o, .cubin, ...)
#       [TARGETS sm80 sm90 ...]            GPU targets (default sm90); several make one header that
#                                          picks the image for the device it runs on
#       [DEFINES NAME=VALUE ...]           -D overrides of `const`s
#       [INCLUDE_DIRS dir ...]             -I directories for `import` (relative to the current source dir)
#       [KIND header|object|cubin|fatbin|ptx|cu]  what to build (default header); object: a relocatable
#                                          object holding the C launcher and its cubins (tilec -c), linked
#                                          into the consumer, which declares the launch functions itself
#       [KERNEL name]                      only this kernel of each file
#       [PREFIX p]                         launcher names p<kernel>_launch (header, object)
#       [OPTIONS opt ...]                  anything else for the tilec command line
#       [OUTPUT_DIR dir])                  default ${CMAKE_CURRENT_BINARY_DIR}/tilec/<name>
#
# Creates an INTERFACE library <name>: linking it puts OUTPUT_DIR on the include path, makes the
# consumer wait for the outputs, links the objects (KIND object), and (KIND header or object) links the CUDA
# driver (CUDA::cuda_driver) and the thread library. Each output is rebuilt when its .tile file or anything it imports changes
# (tilec writes a Make-style depfile, -MD; CMake's DEPFILE feeds it to Make and Ninja), so touching
# an imported file rebuilds exactly the kernels that import it. Also creates <name>_tilec, the
# custom target that generates the outputs. Variables: TILEC_EXECUTABLE, TILEC_PREBUILT_DIR (see
# TilecConfig.cmake).

include_guard(GLOBAL)

function(tilec_add_kernel name)
  cmake_parse_arguments(PARSE_ARGV 1 TK "" "KIND;KERNEL;PREFIX;OUTPUT_DIR"
                        "SOURCES;TARGETS;DEFINES;INCLUDE_DIRS;OPTIONS")
  if(TK_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tilec_add_kernel(${name}): unknown arguments: ${TK_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TK_SOURCES)
    message(FATAL_ERROR "tilec_add_kernel(${name}): SOURCES is required")
  endif()
  if(NOT TK_KIND)
    set(TK_KIND header)
  endif()
  set(_suffixes header h object o cubin cubin fatbin fatbin ptx ptx cu cu)
  list(FIND _suffixes "${TK_KIND}" _i)
  if(_i LESS 0 OR _i GREATER 10)
    message(FATAL_ERROR "tilec_add_kernel(${name}): KIND must be header, object, cubin, fatbin, ptx or cu")
  endif()
  math(EXPR _i "${_i} + 1")
  list(GET _suffixes ${_i} _ext)
  if(NOT TK_TARGETS)
    set(TK_TARGETS sm90)
  endif()
  list(JOIN TK_TARGETS "," _targets)
  if(NOT TK_OUTPUT_DIR)
    set(TK_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/tilec/${name}")
  endif()
  get_filename_component(_outdir "${TK_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  file(MAKE_DIRECTORY "${_outdir}")

  set(_flags --target "${_targets}" --emit "${TK_KIND}")
  foreach(_d IN LISTS TK_DEFINES)
    list(APPEND _flags -D "${_d}")
  endforeach()
  foreach(_dir IN LISTS TK_INCLUDE_DIRS)
    get_filename_component(_dir "${_dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND _flags -I "${_dir}")
  endforeach()
  if(TK_KERNEL)
    list(APPEND _flags --kernel "${TK_KERNEL}")
  endif()
  if(TK_PREFIX)
    list(APPEND _flags --header-prefix "${TK_PREFIX}")
  endif()
  list(APPEND _flags ${TK_OPTIONS})

  set(_outputs)
  cmake_policy(PUSH)
  cmake_policy(SET CMP0116 NEW)  # Ninja: depfile paths made relative to the build tree by CMake
  foreach(_src IN LISTS TK_SOURCES)
    get_filename_component(_abs "${_src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(_stem "${_src}" NAME_WE)
    set(_out "${_outdir}/${_stem}.${_ext}")
    if(TILEC_PREBUILT_DIR)
      get_filename_component(_pre "${TILEC_PREBUILT_DIR}/${name}/${_stem}.${_ext}" ABSOLUTE
                             BASE_DIR "${CMAKE_BINARY_DIR}")
      if(NOT EXISTS "${_pre}")
        message(FATAL_ERROR "tilec_add_kernel(${name}): TILEC_PREBUILT_DIR has no ${name}/${_stem}.${_ext} "
                            "(expected ${_pre})")
      endif()
      add_custom_command(
        OUTPUT "${_out}"
        COMMAND "${CMAKE_COMMAND}" -E copy "${_pre}" "${_out}"
        DEPENDS "${_pre}"
        COMMENT "tilec: using prebuilt ${name}/${_stem}.${_ext}"
        VERBATIM)
    else()
      add_custom_command(
        OUTPUT "${_out}"
        BYPRODUCTS "${_out}.json" "${_out}.d"
        COMMAND ${TILEC_EXECUTABLE} "${_abs}" -o "${_out}" ${_flags} -MD -MF "${_out}.d"
        DEPENDS "${_abs}"
        DEPFILE "${_out}.d"
        COMMENT "tilec ${_src} -> ${name}/${_stem}.${_ext} (${_targets})"
        COMMAND_EXPAND_LISTS
        VERBATIM)
    endif()
    list(APPEND _outputs "${_out}")
  endforeach()
  cmake_policy(POP)

  add_custom_target(${name}_tilec DEPENDS ${_outputs})
  add_library(${name} INTERFACE)
  target_include_directories(${name} INTERFACE "${_outdir}")
  add_dependencies(${name} ${name}_tilec)
  set_target_properties(${name} PROPERTIES TILEC_OUTPUTS "${_outputs}" TILEC_OUTPUT_DIR "${_outdir}")
  if(TK_KIND STREQUAL "object")
    target_link_libraries(${name} INTERFACE ${_outputs})
  endif()
  if(TK_KIND STREQUAL "header" OR TK_KIND STREQUAL "object")
    if(NOT TARGET CUDA::cuda_driver)
      find_package(CUDAToolkit QUIET)
    endif()
    if(TARGET CUDA::cuda_driver)
      target_link_libraries(${name} INTERFACE CUDA::cuda_driver)
    elseif(TILEC_EXECUTABLE)
      # No libcuda.so to link against (a build machine without a GPU driver, perhaps without a CUDA toolkit):
      # the stub `tilec --cuda-stub` writes, with its copy of cuda.h. The real driver is loaded at run time.
      _tilec_cuda_stub()
      target_link_libraries(${name} INTERFACE tilec::cuda_driver_stub)
    elseif(CUDAToolkit_FOUND)
      get_property(_warned GLOBAL PROPERTY TILEC_WARNED_DRIVER)
      if(NOT _warned)
        message(WARNING "tilec_add_kernel: the CUDA driver library (libcuda.so) was not found, so programs "
                        "are linked with plain -lcuda. On a machine without a GPU driver, set "
                        "CUDA_cuda_driver_LIBRARY to a stub (`tilec --cuda-stub DIR` writes DIR/libcuda.so).")
        set_property(GLOBAL PROPERTY TILEC_WARNED_DRIVER TRUE)
      endif()
      target_include_directories(${name} INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
      target_link_libraries(${name} INTERFACE cuda)
    else()
      message(FATAL_ERROR "tilec_add_kernel(${name}): the CUDA toolkit (cuda.h) was not found; set "
                          "CUDAToolkit_ROOT")
    endif()
    find_package(Threads REQUIRED)
    target_link_libraries(${name} INTERFACE Threads::Threads)
  endif()
endfunction()

# The imported library tilec::cuda_driver_stub: ${CMAKE_BINARY_DIR}/tilec-cuda-stub, written at configure time by
# `tilec --cuda-stub` (a libcuda.so with the soname libcuda.so.1, and cuda.h).
function(_tilec_cuda_stub)
  if(TARGET tilec::cuda_driver_stub)
    return()
  endif()
  set(_dir "${CMAKE_BINARY_DIR}/tilec-cuda-stub")
  execute_process(COMMAND ${TILEC_EXECUTABLE} --cuda-stub "${_dir}" RESULT_VARIABLE _rc OUTPUT_QUIET
                  ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "tilec_add_kernel: libcuda.so was not found and `tilec --cuda-stub` failed: ${_err}")
  endif()
  message(STATUS "tilec: no CUDA driver library found; linking against the stub in ${_dir}")
  add_library(tilec::cuda_driver_stub SHARED IMPORTED GLOBAL)
  set_target_properties(tilec::cuda_driver_stub PROPERTIES IMPORTED_LOCATION "${_dir}/libcuda.so"
                        IMPORTED_SONAME "libcuda.so.1" INTERFACE_INCLUDE_DIRECTORIES "${_dir}")
endfunction()
