# tests/consumer/consumer.cmake (included by tests/CMakeLists.txt): the installed
# package works for a consumer. The test installs this build into a prefix
# inside the build tree, checks that every file below is there, then builds
# and runs, against the installed tree only:
#  - main.cpp (C++ API) with find_package(shmfilter), target shmfilter::shmfilter
#    (the static archive; the shared library with -DBUILD_SHARED_LIBS=ON), and with `pkg-config --cflags --libs shmfilter`;
#  - main.c (C API, compiled and linked as C) with find_package, target
#    shmfilter::shared, and with pkg-config: both must need libshmfilter.so.N;
#  - the installed nginx module: its rpath finds the installed library, and
#    `nginx -t` loads it.
# The script is tests/consumer/run.cmake.
set(_shmf_expect
  ${CMAKE_INSTALL_LIBDIR}/libshmfilter.so
  ${CMAKE_INSTALL_LIBDIR}/libshmfilter.so.${PROJECT_VERSION_MAJOR}
  ${CMAKE_INSTALL_LIBDIR}/libshmfilter.so.${PROJECT_VERSION}
  ${CMAKE_INSTALL_INCLUDEDIR}/shmfilter/shmfilter.h
  ${CMAKE_INSTALL_INCLUDEDIR}/shmfilter/segment.hpp
  ${CMAKE_INSTALL_LIBDIR}/cmake/shmfilter/shmfilterConfig.cmake
  ${CMAKE_INSTALL_LIBDIR}/cmake/shmfilter/shmfilterConfigVersion.cmake
  ${CMAKE_INSTALL_LIBDIR}/cmake/shmfilter/shmfilterTargets.cmake
  ${CMAKE_INSTALL_LIBDIR}/pkgconfig/shmfilter.pc
  ${CMAKE_INSTALL_DOCDIR}/LICENSE
  ${CMAKE_INSTALL_DOCDIR}/NOTICE)
get_target_property(_shmf_type shmfilter TYPE)
set(_shmf_static NO)
if(_shmf_type STREQUAL "STATIC_LIBRARY")
  set(_shmf_static YES)
  list(APPEND _shmf_expect ${CMAKE_INSTALL_LIBDIR}/libshmfilter.a)
endif()
if(TARGET shmtool)
  # The man page needs help2man at configure time (shmtool/CMakeLists.txt):
  # without it this test fails, like shmtool_man_page, naming the file.
  list(APPEND _shmf_expect ${CMAKE_INSTALL_BINDIR}/shmtool ${CMAKE_INSTALL_MANDIR}/man1/shmtool.1
       ${CMAKE_INSTALL_DATADIR}/bash-completion/completions/shmtool)
endif()
set(_shmf_nginx_module "")
set(_shmf_nginx "")
if(TARGET nginx_module)
  set(_shmf_nginx_module ${SHMFILTER_NGINX_MODULES_DIR}/ngx_http_shmfilter_module.so)
  list(APPEND _shmf_expect ${_shmf_nginx_module})
  find_program(SHMFILTER_NGINX_BINARY nginx)
  if(SHMFILTER_NGINX_BINARY)
    set(_shmf_nginx ${SHMFILTER_NGINX_BINARY})
  endif()
endif()
if(TARGET shmfilter_python AND NOT IS_ABSOLUTE "${SHMFILTER_PYTHON_INSTALL_DIR}")
  list(APPEND _shmf_expect ${SHMFILTER_PYTHON_INSTALL_DIR}/shmfilter/__init__.py
       ${SHMFILTER_PYTHON_INSTALL_DIR}/shmfilter/_version.py)  # python/CMakeLists.txt
endif()
string(REPLACE ";" "|" _shmf_expect "${_shmf_expect}")
add_test(NAME install_consumer
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR}
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-test
    -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}
    -DCXX=${CMAKE_CXX_COMPILER}
    -DCC=${CMAKE_C_COMPILER}
    -DGENERATOR=${CMAKE_GENERATOR}
    -DCONFIG=$<CONFIG>
    -DSANITIZE=${SHMFILTER_SANITIZE}
    -DINSTALL_PREFIX=${CMAKE_INSTALL_PREFIX}
    -DLIBDIR=${CMAKE_INSTALL_LIBDIR}
    -DSOVERSION=${PROJECT_VERSION_MAJOR}
    -DSTATIC=${_shmf_static}
    "-DEXPECT=${_shmf_expect}"
    -DNGINX_MODULE=${_shmf_nginx_module}
    -DNGINX=${_shmf_nginx}
    -P ${CMAKE_CURRENT_LIST_DIR}/run.cmake)
set_tests_properties(install_consumer PROPERTIES TIMEOUT 300 LABELS install)
