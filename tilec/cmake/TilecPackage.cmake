# tilec_add_package(): build a versioned artifact package (`tilec package`, docs/deploy.md#artifact-packages) at
# build time, and install it.
#
#   tilec_add_package(<name>
#       SOURCES a.tile [b.tile ...]        one fatbin (of every target, with the forward-compatible PTX) per source
#       [TARGETS sm80 sm90 ...]            CUDA targets (default sm80 sm90)
#       [DEFINES NAME=VALUE ...]           -D overrides of `const`s
#       [INCLUDE_DIRS dir ...]             -I directories for `import` (relative to the current source dir)
#       [SIZES NAME=VALUE ...]             --size: the check files' sizes (default 37 each)
#       [NO_PTX]                           leave the PTX out
#       [WHEEL module [WHEEL_VERSION v]]   also the wheel <module>-<v>-py3-none-any.whl (default version 1.0)
#       [OPTIONS opt ...]                  anything else for `tilec package` (--compiler nvrtc, ...)
#       [OUTPUT_DIR dir]                   default ${CMAKE_CURRENT_BINARY_DIR}/tilec/<name>
#       [DESTINATION dir])                 install(DIRECTORY) the package there (relative: under the prefix)
#
# Creates the custom target <name> (built by `all`), whose property TILEC_PACKAGE_DIR is the package directory and
# TILEC_PACKAGE_INDEX its index.json. The package is rebuilt when a source or a file it imports changes (`tilec
# package -MD` writes the rule to <dir>.d, beside the package; CMake's DEPFILE feeds it to Make and Ninja). With
# TILEC_PREBUILT_DIR, the package directory ${TILEC_PREBUILT_DIR}/<name>/ is copied instead of running tilec.

include_guard(GLOBAL)

function(tilec_add_package name)
  cmake_parse_arguments(PARSE_ARGV 1 TP "NO_PTX" "OUTPUT_DIR;DESTINATION;WHEEL;WHEEL_VERSION"
                        "SOURCES;TARGETS;DEFINES;INCLUDE_DIRS;SIZES;OPTIONS")
  if(TP_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tilec_add_package(${name}): unknown arguments: ${TP_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TP_SOURCES)
    message(FATAL_ERROR "tilec_add_package(${name}): SOURCES is required")
  endif()
  if(TP_WHEEL_VERSION AND NOT TP_WHEEL)
    message(FATAL_ERROR "tilec_add_package(${name}): WHEEL_VERSION without WHEEL")
  endif()
  if(NOT TP_TARGETS)
    set(TP_TARGETS sm80 sm90)
  endif()
  list(JOIN TP_TARGETS "," _targets)
  if(NOT TP_OUTPUT_DIR)
    set(TP_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/tilec/${name}")
  endif()
  get_filename_component(_outdir "${TP_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  set(_index "${_outdir}/index.json")

  set(_sources)
  foreach(_src IN LISTS TP_SOURCES)
    get_filename_component(_abs "${_src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND _sources "${_abs}")
  endforeach()
  set(_flags --target "${_targets}")
  foreach(_d IN LISTS TP_DEFINES)
    list(APPEND _flags -D "${_d}")
  endforeach()
  foreach(_dir IN LISTS TP_INCLUDE_DIRS)
    get_filename_component(_dir "${_dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND _flags -I "${_dir}")
  endforeach()
  if(TP_SIZES)
    list(JOIN TP_SIZES "," _sizes)
    list(APPEND _flags --size "${_sizes}")
  endif()
  if(TP_NO_PTX)
    list(APPEND _flags --no-ptx)
  endif()
  if(TP_WHEEL)
    if(NOT TP_WHEEL_VERSION)
      set(TP_WHEEL_VERSION 1.0)
    endif()
    list(APPEND _flags --wheel "${TP_WHEEL}" --wheel-version "${TP_WHEEL_VERSION}")
  endif()
  list(APPEND _flags ${TP_OPTIONS})

  if(TILEC_PREBUILT_DIR)
    get_filename_component(_pre "${TILEC_PREBUILT_DIR}/${name}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
    if(NOT EXISTS "${_pre}/index.json")
      message(FATAL_ERROR "tilec_add_package(${name}): TILEC_PREBUILT_DIR has no ${name}/index.json "
                          "(expected ${_pre}/index.json)")
    endif()
    add_custom_command(
      OUTPUT "${_index}"
      COMMAND "${CMAKE_COMMAND}" -E copy_directory "${_pre}" "${_outdir}"
      DEPENDS "${_pre}/index.json"
      COMMENT "tilec: using the prebuilt package ${name}"
      VERBATIM)
  else()
    cmake_policy(PUSH)
    cmake_policy(SET CMP0116 NEW)  # Ninja: depfile paths made relative to the build tree by CMake
    add_custom_command(
      OUTPUT "${_index}"
      BYPRODUCTS "${_outdir}.d"
      COMMAND ${TILEC_EXECUTABLE} package ${_sources} -o "${_outdir}" ${_flags} -MD -MF "${_outdir}.d"
      DEPENDS ${_sources}
      DEPFILE "${_outdir}.d"
      COMMENT "tilec package ${name} (${_targets})"
      COMMAND_EXPAND_LISTS
      VERBATIM)
    cmake_policy(POP)
  endif()
  add_custom_target(${name} ALL DEPENDS "${_index}")
  set_target_properties(${name} PROPERTIES TILEC_PACKAGE_DIR "${_outdir}" TILEC_PACKAGE_INDEX "${_index}")
  if(TP_DESTINATION)
    install(DIRECTORY "${_outdir}/" DESTINATION "${TP_DESTINATION}")
  endif()
endfunction()
