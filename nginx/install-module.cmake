# nginx/install-module.cmake: run by cmake --install after nginx/CMakeLists.txt
# has set SHMF_NGINX_MODULE (the built module), SHMF_NGINX_MODULES_DIR and
# SHMF_LIBDIR (relative to the prefix, or absolute) and SHMF_BUILD_RPATH (the
# rpath scripts/build-nginx-module.sh linked it with: the build tree's shared/).
# Installs the module and rewrites that rpath to the installed library directory,
# as $ORIGIN/<relative path> (the tree can be moved), or absolute when shorter:
# the rewrite happens in place, so the new rpath may not be longer than the old.
foreach(_v SHMF_NGINX_MODULES_DIR SHMF_LIBDIR)
  if(NOT IS_ABSOLUTE "${${_v}}")
    set(${_v} "${CMAKE_INSTALL_PREFIX}/${${_v}}")
  endif()
endforeach()
get_filename_component(_name "${SHMF_NGINX_MODULE}" NAME)
set(_dest "$ENV{DESTDIR}${SHMF_NGINX_MODULES_DIR}/${_name}")
# Always copy afresh: an up-to-date check would keep a module whose rpath was
# already rewritten, which the rewrite below would not recognise.
file(REMOVE "${_dest}")
file(INSTALL DESTINATION "${SHMF_NGINX_MODULES_DIR}" TYPE FILE FILES "${SHMF_NGINX_MODULE}")

file(RELATIVE_PATH _rel "${SHMF_NGINX_MODULES_DIR}" "${SHMF_LIBDIR}")
string(REGEX REPLACE "/+$" "" _rel "${_rel}")
set(_rpath "$ORIGIN")
if(_rel)
  string(APPEND _rpath "/${_rel}")
endif()
string(LENGTH "${_rpath}" _n_rel)
string(LENGTH "${SHMF_LIBDIR}" _n_abs)
if(_n_abs LESS _n_rel)
  set(_rpath "${SHMF_LIBDIR}")
endif()
string(LENGTH "${_rpath}" _n_new)
string(LENGTH "${SHMF_BUILD_RPATH}" _n_old)
if(_n_new GREATER _n_old)
  message(FATAL_ERROR "install ${_name}: its new rpath '${_rpath}' is longer than the one it was built "
          "with ('${SHMF_BUILD_RPATH}'), so it cannot be rewritten in place: set SHMFILTER_NGINX_MODULES_DIR "
          "nearer to the library directory, or build in a directory with a longer path")
endif()
file(RPATH_CHANGE FILE "${_dest}" OLD_RPATH "${SHMF_BUILD_RPATH}" NEW_RPATH "${_rpath}")
