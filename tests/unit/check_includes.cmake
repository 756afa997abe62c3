# tests/unit/check_includes.cmake: fails when a source file in DIR includes a
# header from a layer it must not depend on (the arrows in lib/README.md point down).
#   cmake -DDIR=<folder> -DFORBID=structures/,check/,capi/ -P check_includes.cmake
# Scans DIR/*.h, *.hpp, *.cpp, *.c (recursively) for #include "X..." or <X...>
# with X one of FORBID (comma-separated), and names every offending file:line.
if(NOT DEFINED DIR OR NOT DEFINED FORBID)
  message(FATAL_ERROR "usage: cmake -DDIR=<folder> -DFORBID=a/,b/ -P check_includes.cmake")
endif()
string(REPLACE "," ";" FORBID "${FORBID}")  # commas: a ; would not survive add_test
get_filename_component(DIR "${DIR}" ABSOLUTE)
if(NOT IS_DIRECTORY "${DIR}")
  message(FATAL_ERROR "${DIR} is not a folder: pass the layer's folder as -DDIR")
endif()
file(GLOB_RECURSE _files "${DIR}/*.h" "${DIR}/*.hpp" "${DIR}/*.cpp" "${DIR}/*.c")
if(NOT _files)
  message(FATAL_ERROR "no source files under ${DIR}: a check of nothing cannot fail")
endif()
set(_bad "")
foreach(_f ${_files})
  file(STRINGS "${_f}" _lines)
  set(_n 0)
  foreach(_line IN LISTS _lines)
    math(EXPR _n "${_n} + 1")
    foreach(_layer ${FORBID})
      string(REGEX MATCH "^[ \t]*#[ \t]*include[ \t]*[\"<]${_layer}" _hit "${_line}")
      if(_hit)
        file(RELATIVE_PATH _rel "${DIR}" "${_f}")
        string(APPEND _bad "  ${_rel}:${_n} includes \"${_layer}...\"\n")
      endif()
    endforeach()
  endforeach()
endforeach()
list(LENGTH _files _count)
if(_bad)
  message(FATAL_ERROR "${DIR} must not include from ${FORBID}:\n${_bad}"
          "Move the code that needs the upper layer into that layer (see lib/README.md).")
endif()
message(STATUS "${_count} files under ${DIR}: none includes from ${FORBID}")
