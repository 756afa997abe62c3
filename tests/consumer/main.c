/* tests/consumer/main.c: a C program over the installed C API, linked against
 * the installed libshmfilter.so (run.cmake checks that it is the shared library
 * the program needs). Creates a segment and a Bloom filter, adds a key, finds
 * it, removes the segment. Prints "c consumer ok" on success. */
#include <shmfilter/shmfilter.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
  char name[64];
  shmf_segment *seg = NULL;
  shmf_bloom *bloom = NULL;
  shmf_segment_options seg_opts;
  shmf_bloom_options opts;
  int added, found, rc;

  snprintf(name, sizeof name, "shmf-c-consumer-%ld", (long)getpid());
  shmf_segment_options_init(&seg_opts);
  seg_opts.size = 1 << 20;
  seg_opts.max_size = 64 << 20;
  rc = shmf_segment_create(name, &seg_opts, &seg);
  if (rc < 0) {
    printf("c consumer FAILED: create %s: %s: %s\n", name, shmf_strerror(rc), shmf_last_error_message());
    return 1;
  }
  shmf_bloom_options_init(&opts);
  opts.capacity = 1000;
  rc = shmf_bloom_create(seg, "seen", &opts, &bloom);
  added = rc < 0 ? rc : shmf_bloom_add(bloom, "device-42", strlen("device-42"));
  found = rc < 0 ? rc : shmf_bloom_contains(bloom, "device-42", strlen("device-42"));
  if (bloom != NULL) shmf_bloom_close(bloom);
  shmf_segment_close(seg);
  shmf_segment_remove(name, NULL);
  if (rc < 0 || added != 1 || found != 1) {
    printf("c consumer FAILED: create %d add %d contains %d: %s\n", rc, added, found, shmf_last_error_message());
    return 1;
  }
  printf("c consumer ok (libshmfilter %s, %s)\n", shmf_version(), name);
  return 0;
}
