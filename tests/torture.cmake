# tests/torture.cmake (included by tests/CMakeLists.txt): the crash-recovery
# torture program shmfilter_torture and its bounded CI run.
#
# The sweep's kill-point list is generated at build time from lib/ (every
# SHMF_KILL_POINT("name")), so it cannot drift from the library.
file(GLOB _shmf_kp_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/lib/*.cpp ${PROJECT_SOURCE_DIR}/lib/*.h)
set(_shmf_kp_out ${CMAKE_CURRENT_BINARY_DIR}/torture_gen/torture_kill_points.inc)
add_custom_command(OUTPUT ${_shmf_kp_out}
  COMMAND ${CMAKE_COMMAND} -DLIB_DIR=${PROJECT_SOURCE_DIR}/lib -DOUT=${_shmf_kp_out}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/torture/scan_kill_points.cmake
  DEPENDS ${_shmf_kp_sources} ${CMAKE_CURRENT_SOURCE_DIR}/torture/scan_kill_points.cmake
  COMMENT "Collecting SHMF_KILL_POINT names from lib/ for shmfilter_torture")

add_executable(shmfilter_torture
  ${CMAKE_CURRENT_SOURCE_DIR}/torture.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/torture/oracle.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/torture/targets.cpp
  ${_shmf_kp_out})
target_include_directories(shmfilter_torture PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/torture ${CMAKE_CURRENT_BINARY_DIR}/torture_gen
  ${PROJECT_SOURCE_DIR}/lib ${PROJECT_SOURCE_DIR}/bench)
target_link_libraries(shmfilter_torture PRIVATE shmfilter::shmfilter shmfilter_flags roaring::roaring)
target_compile_definitions(shmfilter_torture PRIVATE
  $<$<BOOL:${SHMFILTER_KILL_POINTS}>:SHMFILTER_KILL_POINTS=1>
  $<$<TARGET_EXISTS:shmtool>:SHMTOOL_PATH="$<TARGET_FILE:shmtool>">)
add_dependencies(shmf_multiprocess_tests shmfilter_torture)

# Bounded CI run: a few hundred SIGKILLs/SIGSTOPs over 3 rounds of 4 workers,
# then the sweep over every kill point. Fails on any loss, hang or inconsistency.
# Measured: see docs/crash-safety.md.
if(SHMFILTER_KILL_POINTS)
  add_test(NAME torture_ci COMMAND shmfilter_torture --workers 4 --rounds 3 --kills 300 --seed 20261130 --sweep)
else()
  add_test(NAME torture_ci COMMAND shmfilter_torture --workers 4 --rounds 3 --kills 300 --seed 20261130)
endif()
set_tests_properties(torture_ci PROPERTIES LABELS multiprocess TIMEOUT 300)

# The oracle and the verifiers must be able to fail: known histories and a
# segment damaged behind the oracle's back (tests/torture/test_oracle.cpp).
add_executable(test_torture_oracle
  ${CMAKE_CURRENT_SOURCE_DIR}/torture/test_oracle.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/torture/oracle.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/torture/targets.cpp)
target_include_directories(test_torture_oracle PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/torture ${PROJECT_SOURCE_DIR}/lib ${PROJECT_SOURCE_DIR}/bench)
target_link_libraries(test_torture_oracle PRIVATE shmfilter::shmfilter shmfilter_flags roaring::roaring
                      GTest::gtest GTest::gtest_main)
target_compile_definitions(test_torture_oracle PRIVATE SHMTOOL_PATH="")
gtest_discover_tests(test_torture_oracle DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS multiprocess)
add_dependencies(shmf_multiprocess_tests test_torture_oracle)
