// examples/gen_stream.cpp: writes the demo's workload stream (tests/support/workload.h)
// to a file, so the same events can be fed to shmtool and to redis-cli.
//
//   gen_stream [--scale 0.01] [--seed 42] [--format keys|plain|redis] [--date 2026-11-30] OUT
//
//   keys   "plan:device16hex" per line:   shmtool bloom add SEG today < OUT
//   plain  "plan device16hex" per line
//   redis  "SADD freq:{plan}:{date} device16hex" per line:   redis-cli < OUT
//
// Deterministic by seed; scale 1.0 = the mission's 1.2e8 distinct pairs
// (about 1.7e8 events with 30% repeats, ~4.5 GB of text: pick the scale).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "workload.h"

int main(int argc, char** argv) {
  shmf_bench::WorkloadOptions o;
  std::string format = "keys", date = "2026-11-30", out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "gen_stream: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--scale") o.scale = atof(val().c_str());
    else if (a == "--seed") o.seed = strtoull(val().c_str(), nullptr, 10);
    else if (a == "--format") format = val();
    else if (a == "--date") date = val();
    else if (a == "--help" || a == "-h") {
      printf("Usage: gen_stream [--scale S] [--seed N] [--format keys|plain|redis] [--date D] OUT\n");
      return 0;
    } else if (out.empty() && a[0] != '-') out = a;
    else {
      fprintf(stderr, "gen_stream: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (out.empty() || !(o.scale > 0 && o.scale <= 10) || (format != "keys" && format != "plain" && format != "redis")) {
    fprintf(stderr, "gen_stream: pass OUT, --scale in (0, 10] and --format keys, plain or redis\n");
    return 2;
  }
  shmf_bench::Workload w(o);
  std::vector<shmf_bench::Event> events;
  while (w.distinct_so_far() < w.target_distinct()) events.push_back(w.next());
  try {
    if (format == "keys") shmf_bench::Workload::write_keys(out, events);
    else if (format == "plain") shmf_bench::Workload::write_stream(out, events);
    else shmf_bench::Workload::write_redis(out, events, date);
  } catch (const std::exception& e) {
    fprintf(stderr, "gen_stream: %s\n", e.what());
    return 1;
  }
  fprintf(stderr, "gen_stream: %zu events, %llu distinct pairs -> %s\n", events.size(),
          static_cast<unsigned long long>(w.target_distinct()), out.c_str());
  return 0;
}
