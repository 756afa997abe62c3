/* tests/unit/c_api_smoke.c: compiled as C99 (-std=c99 -pedantic, tests/CMakeLists.txt)
 * and linked into test_c_api, proving shmfilter.h is valid C and usable from C.
 * shmf_c_smoke() returns 0 on success, else the number of the failed check. */
#include "shmfilter/shmfilter.h"

#include <stdio.h>
#include <string.h>

int shmf_c_smoke(const char *segment_name);

#define CHECK(n, cond)                                             \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "c_api_smoke check %d failed: %s (%s)\n", n, \
              #cond, shmf_last_error_message());                   \
      return n;                                                    \
    }                                                              \
  } while (0)

int shmf_c_smoke(const char *segment_name) {
  shmf_segment_options so;
  shmf_segment *seg = NULL;
  shmf_bloom_options bo;
  shmf_bloom *bloom = NULL;
  shmf_bloom *missing = NULL;
  shmf_set_options xo;
  shmf_set *set = NULL;
  shmf_hll *hll = NULL;
  shmf_bloom_stats bs;
  uint64_t keys[3] = {1, 2, 3};
  uint8_t out[3] = {0, 0, 0};
  uint64_t n = 0;
  int rc;
  size_t count = 0, need = 0;
  shmf_structure_info infos[3];
  static char redis[SHMF_HLL_REDIS_DENSE_BYTES];

  CHECK(1, strcmp(shmf_version(), "") != 0);
  CHECK(2, SHMF_VERSION_MAJOR >= 0);
  shmf_segment_options_init(&so);
  so.size = 4u << 20;
  so.max_size = 64u << 20;
  CHECK(3, shmf_segment_create(segment_name, &so, &seg) == 0 && seg != NULL);

  shmf_bloom_options_init(&bo);
  bo.capacity = 1000;
  bo.error = 0.01;
  bo.seed = 42;
  bo.has_seed = 1;
  CHECK(4, shmf_bloom_create(seg, "c-bloom", &bo, &bloom) == 0);
  CHECK(5, shmf_bloom_add(bloom, "device-1", 8) == 1);
  CHECK(6, shmf_bloom_add(bloom, "device-1", 8) == 0);
  CHECK(7, shmf_bloom_contains(bloom, "device-1", 8) == 1);
  CHECK(8, shmf_bloom_add_many_u64(bloom, keys, 2, NULL) == 2);
  CHECK(9, shmf_bloom_contains_many_u64(bloom, keys, 3, out) >= 2 && out[0] == 1 && out[1] == 1);
  CHECK(10, shmf_bloom_stats_get(bloom, &bs) == 0 && bs.capacity == 1000 && bs.seed == 42);

  shmf_set_options_init(&xo);
  xo.capacity = 100;
  CHECK(11, shmf_set_create(seg, "c-set", &xo, &set) == 0);
  CHECK(12, shmf_set_insert_unique_u64(set, 7) == 1);
  CHECK(13, shmf_set_insert_unique_u64(set, 7) == 0);
  CHECK(14, shmf_set_size(set, &n) == 0 && n == 1);

  CHECK(15, shmf_hll_open_or_create(seg, "c-hll", &hll) == 0);
  CHECK(16, shmf_hll_add_u64(hll, 99) == 1);
  CHECK(17, shmf_hll_count(hll, &n) == 0 && n == 1);

  CHECK(23, shmf_segment_list(seg, NULL, 0, &count) == -SHMF_EFULL && count == 3);
  CHECK(24, shmf_segment_list(seg, infos, 3, &count) == 3);
  CHECK(25, strcmp(infos[0].name, "c-bloom") == 0 && infos[0].kind == SHMF_KIND_BLOOM && infos[0].readable == 1);
  CHECK(26, strcmp(infos[1].name, "c-hll") == 0 && strcmp(shmf_kind_name(infos[1].kind), "hll") == 0);
  CHECK(27, shmf_hll_export_redis(hll, redis, sizeof redis, &need) == SHMF_HLL_REDIS_DENSE_BYTES);
  CHECK(28, shmf_hll_count_redis(redis, need, &n) == 0 && n == 1);
  CHECK(29, shmf_hll_import_redis(hll, redis, 4) == -SHMF_EBADINPUT);

  rc = shmf_bloom_open(seg, "no-such", &missing);
  CHECK(18, rc == -SHMF_ENOTFOUND && missing == NULL);
  CHECK(19, strlen(shmf_last_error_message()) > 0);
  CHECK(20, strcmp(shmf_strerror(rc), "no such segment or structure") == 0);

  shmf_hll_close(hll);
  shmf_set_close(set);
  shmf_bloom_close(missing);  /* NULL after the failed open: a no-op */
  shmf_bloom_close(bloom);
  CHECK(21, shmf_segment_close(seg) == 0);
  CHECK(22, shmf_segment_remove(segment_name, NULL) == 1);
  return 0;
}
