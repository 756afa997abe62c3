# python/tests/tests.cmake: the Python package's tests, included by
# tests/servers/CMakeLists.txt (shmf_server_test and its environment). Debian's
# /usr/bin/python3 with python3-pytest, python3-gunicorn, python3-redis,
# python3-numpy, python3-venv. docs/python.md, "Tests".
#   python_binding          the suite against the compiled module CMake staged in
#                           <build>/python (shmfilter.BINDING == "compiled"), and
#                           test_compiled.py (what only the compiled binding does)
#   python_binding_ctypes   the same suite through the ctypes fallback (the source tree)
#   python_venv             a clean venv: pip install --no-index ./python, import from
#                           outside the repository; then the venv the gunicorn tests use
#   python_cmake_install    cmake --install into a scratch prefix, import from there
#   gunicorn_*              4 prefork workers under a known stream with an exact oracle,
#                           a worker SIGKILL and a SIGHUP reload, against the INSTALLED package
set(_py ${PROJECT_SOURCE_DIR}/python/tests)
set(_suite ${_py}/test_binding.py ${_py}/test_package.py ${_py}/test_header.py)
if(SHMFILTER_PYTHON_STAGE)
  shmf_server_test(python_binding 300 bash ${_d}/pytest.sh ${_suite} ${_py}/test_compiled.py)
  set_property(TEST python_binding APPEND PROPERTY ENVIRONMENT
               SHMF_PYTHON_PATH=${SHMFILTER_PYTHON_STAGE} SHMF_TEST_BINDING=compiled)
elseif(NOT SHMFILTER_BUILD_PYTHON STREQUAL "OFF")
  # AUTO without Python's headers: registered, and it fails naming the package
  shmf_server_test(python_binding 60 bash -c
    "echo 'FAIL: no compiled Python module was built: install Debian package python3-dev (scripts/install-deps.sh), then reconfigure' >&2; exit 1")
else()
  message(STATUS "shmfilter: python_binding not registered (SHMFILTER_BUILD_PYTHON=OFF); the ctypes suite runs")
endif()
shmf_server_test(python_binding_ctypes 300 bash ${_d}/pytest.sh ${_suite})
set_property(TEST python_binding_ctypes APPEND PROPERTY ENVIRONMENT SHMFILTER_BINDING=ctypes SHMF_TEST_BINDING=ctypes)

set(_venvs ${CMAKE_BINARY_DIR}/python-venv)
shmf_server_test(python_venv 300 bash ${_py}/venv_install.sh ${_venvs})
set_tests_properties(python_venv PROPERTIES FIXTURES_SETUP python_venv)
if(NOT SHMFILTER_BUILD_PYTHON STREQUAL "OFF")  # OFF: cmake --install has no Python package to install
  shmf_server_test(python_cmake_install 300 bash ${_py}/cmake_install.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_BINARY_DIR}/python-cmake-install)
endif()
set(_g ${_py}/test_gunicorn.py)
shmf_server_test(gunicorn_oracle 300 bash ${_d}/pytest.sh ${_g} -k "exact_oracle or functional_and_metrics")
shmf_server_test(gunicorn_kill 300 bash ${_d}/pytest.sh ${_g} -k sigkill)
shmf_server_test(gunicorn_reload 300 bash ${_d}/pytest.sh ${_g} -k hup_reload)
foreach(_t gunicorn_oracle gunicorn_kill gunicorn_reload)
  set_tests_properties(${_t} PROPERTIES FIXTURES_REQUIRED python_venv)
  set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT
               SHMF_PYTHON=${_venvs}/site/bin/python SHMF_TEST_INSTALLED=1 SHMF_TEST_BINDING=compiled)
endforeach()
