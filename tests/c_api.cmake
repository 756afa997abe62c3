# tests/c_api.cmake (included by tests/CMakeLists.txt): test_c_api also links
# tests/c_api_smoke.c, compiled as strict C99, so CI proves that
# include/shmfilter/shmfilter.h is a valid C header and usable from C.
if(TARGET test_c_api)
  target_sources(test_c_api PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/c_api_smoke.c)
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/c_api_smoke.c PROPERTIES
    COMPILE_OPTIONS "-std=c99;-Wall;-Wextra;-pedantic;-Werror")
endif()

# The C sidecar example answers "seen before?" correctly for a tiny stdin.
if(TARGET c_sidecar)
  add_test(NAME c_sidecar_smoke COMMAND sh -c
    "n=shmf-test-sidecar-$$; printf 'a\\nb\\na\\n' | \"$0\" $n; rc=$?; rm -f /dev/shm/$n; exit $rc"
    $<TARGET_FILE:c_sidecar>)
  set_tests_properties(c_sidecar_smoke PROPERTIES TIMEOUT 30
    PASS_REGULAR_EXPRESSION "lines 3 new 2 seen_before 1")
endif()
