# tests/consumer/consumer.cmake (included by tests/CMakeLists.txt): the installed
# package works for a consumer. The test installs this build into a prefix
# inside the build tree, then builds and runs tests/consumer/main.cpp twice:
# once with find_package(shmfilter) (CMake config + version file), once with a
# plain compiler line from `pkg-config --cflags --libs shmfilter`.
# The script is tests/consumer/run.cmake.
add_test(NAME install_consumer
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR}
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-test
    -DSOURCE_DIR=${CMAKE_CURRENT_LIST_DIR}
    -DCXX=${CMAKE_CXX_COMPILER}
    -DGENERATOR=${CMAKE_GENERATOR}
    -DCONFIG=$<CONFIG>
    -DSANITIZE=${SHMFILTER_SANITIZE}
    -P ${CMAKE_CURRENT_LIST_DIR}/run.cmake)
set_tests_properties(install_consumer PROPERTIES TIMEOUT 300 LABELS install)
