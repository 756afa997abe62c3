# tests/demo.cmake (included by tests/CMakeLists.txt): the README's demo runs
# and succeeds at a small scale, so CI catches a broken demo stage. The demo
# exits non-zero when any stage's own checks fail or the segment is not
# consistent afterwards.
if(TARGET demo)
  add_test(NAME demo_smoke COMMAND demo --workers 3 --scale 0.002 --seed 7)
  set_tests_properties(demo_smoke PROPERTIES TIMEOUT 120 LABELS demo)
endif()
