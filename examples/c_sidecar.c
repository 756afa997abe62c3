/* examples/c_sidecar.c: a tiny C sidecar over the shmfilter C API.
 *
 *   c_sidecar SEGMENT [FILTER] < device_ids.txt
 *
 * Opens (or creates) segment SEGMENT and Bloom filter FILTER (default
 * "seen", capacity 1e6 at 1% false positives), reads one device id per line
 * from stdin, asks "seen before?" for each (shmf_bloom_add returns 1 for a new
 * key) and prints the counts. Several copies run at once share the filter.
 * Exit: 0 ok, 1 shmfilter error (message on stderr), 2 usage. */
#include <shmfilter/shmfilter.h>

#include <stdio.h>
#include <string.h>

static int die(const char *what, int rc) {
  fprintf(stderr, "c_sidecar: %s: %s: %s\n", what, shmf_strerror(rc), shmf_last_error_message());
  return 1;
}

int main(int argc, char **argv) {
  const char *filter = argc > 2 ? argv[2] : "seen";
  shmf_segment *seg = NULL;
  shmf_bloom *bloom = NULL;
  shmf_bloom_options opts;
  char line[4096];
  unsigned long long lines = 0, fresh = 0, seen = 0;
  int rc;

  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s SEGMENT [FILTER] < ids\n", argv[0]);
    return 2;
  }
  rc = shmf_segment_open_or_create(argv[1], NULL, &seg);
  if (rc < 0) return die("open segment", rc);
  rc = shmf_bloom_open(seg, filter, &bloom);
  if (rc == -SHMF_ENOTFOUND) {
    shmf_bloom_options_init(&opts);
    opts.capacity = 1000000;
    opts.error = 0.01;
    rc = shmf_bloom_create(seg, filter, &opts, &bloom);
    if (rc == -SHMF_EEXISTS) rc = shmf_bloom_open(seg, filter, &bloom); /* another sidecar won the race */
  }
  if (rc < 0) {
    shmf_segment_close(seg);
    return die("open filter", rc);
  }
  while (fgets(line, sizeof line, stdin) != NULL) {
    size_t len = strcspn(line, "\r\n");
    if (len == 0) continue;
    rc = shmf_bloom_add(bloom, line, len);
    if (rc < 0) {
      shmf_bloom_close(bloom);
      shmf_segment_close(seg);
      return die("add", rc);
    }
    ++lines;
    if (rc == 1) ++fresh; else ++seen;
  }
  printf("lines %llu new %llu seen_before %llu\n", lines, fresh, seen);
  shmf_bloom_close(bloom);
  shmf_segment_close(seg);
  return 0;
}
