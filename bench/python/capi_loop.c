/* bench/python/capi_loop.c: the C API's own per-call cost of what
 * bench/python_bench.py measures from Python: shmf_window_mark_if_unseen(plan,
 * device) with the same keys (device i = the 16 hex digits of i), on a fresh
 * window per repetition (pass "new": every pair new; pass "seen": again).
 *
 *   capi_loop SEGMENT N REPS EXPECTED_PER_BUCKET   ->  one line per repetition:
 *   "<ns per call, new> <ns per call, seen>"
 * Built and run by bench/python_bench.py against the package's own library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shmfilter/shmfilter.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: capi_loop SEGMENT N REPS EXPECTED_PER_BUCKET\n");
    return 2;
  }
  const char *segname = argv[1];
  size_t n = strtoull(argv[2], NULL, 10);
  int reps = atoi(argv[3]);
  shmf_segment_options so;
  shmf_segment_options_init(&so);
  so.size = 256ull << 20;
  shmf_segment *seg;
  if (shmf_segment_create(segname, &so, &seg) < 0) {
    fprintf(stderr, "capi_loop: %s\n", shmf_last_error_message());
    return 1;
  }
  char *keys = malloc(n * 17);
  for (size_t i = 0; i < n; i++) snprintf(keys + i * 17, 17, "%016zx", i);
  volatile int sink = 0;
  for (int r = 0; r < reps; r++) {
    shmf_window_options wo;
    shmf_window_options_init(&wo);
    wo.retention = 7;
    wo.expected_per_bucket = strtoull(argv[4], NULL, 10);
    char name[32];
    snprintf(name, sizeof name, "w%d", r);
    shmf_window *w;
    if (shmf_window_create(seg, name, &wo, &w) < 0 || shmf_window_set_now(w, 1700000000) < 0) {
      fprintf(stderr, "capi_loop: %s\n", shmf_last_error_message());
      return 1;
    }
    double t[2];
    for (int pass = 0; pass < 2; pass++) {
      double t0 = now_ns();
      for (size_t i = 0; i < n; i++) sink += shmf_window_mark_if_unseen(w, 42, keys + i * 17, 16, 7);
      t[pass] = (now_ns() - t0) / (double)n;
    }
    printf("%.1f %.1f\n", t[0], t[1]);
    shmf_window_close(w);
  }
  shmf_segment_close(seg);
  shmf_segment_remove(segname, NULL);
  free(keys);
  return sink < 0;
}
