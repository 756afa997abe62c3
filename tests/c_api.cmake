# tests/c_api.cmake (included by tests/CMakeLists.txt): test_c_api also links
# tests/c_api_smoke.c, compiled as strict C99, so CI proves that
# include/shmfilter/shmfilter.h is a valid C header and usable from C.
if(TARGET test_c_api)
  target_sources(test_c_api PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/c_api_smoke.c)
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/c_api_smoke.c PROPERTIES
    COMPILE_OPTIONS "-std=c99;-Wall;-Wextra;-pedantic;-Werror")
endif()
