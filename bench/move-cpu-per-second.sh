#!/bin/bash
# Every node's busiest threads, second by second, around an add (issue
# 16; docs/bench-log/2026-11-26-layout-grow-4.md): a local 3-node cluster
# (R = 3) filled with N keys of 1 KiB (default 300000), a constant-rate
# mixed:50 load of RATE req/s (default 8500) on 128 connections for 60 s,
# a fourth node added (`ataman cluster add --no-wait`) ADD_AT (15)
# seconds in. Every node's threads' CPU ticks are read from /proc about
# once a second; printed per interval, from the add: the ticks of all the
# nodes together (100 a second is one core) and the five busiest threads
# (node index: thread name).
# Usage: bench/move-cpu-per-second.sh [N], from the repository root after
# `cargo build --release -p ataman --bin ataman`. Loopback ports
# BASE_PORT (19751) .. +3 and +1000 .. +1003.
set -eu
B=${ATAMAN:-target/release/ataman}
N=${1:-300000}
BASE=${BASE_PORT:-19751}
R=${BENCH_DIR:-/tmp/ataman-move-cpu}; rm -rf "$R"; mkdir -p "$R"
U="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE + 1)),http://127.0.0.1:$((BASE + 2))"
$B cluster start --nodes 3 --base-port "$BASE" --dir "$R/c" -- \
  --anti-entropy-interval-ms 0 --anti-entropy-rate-bytes "${RATE_BYTES:-8388608}" > "$R/start.out" 2> "$R/start.err" &
SUP=$!
trap 'kill $SUP 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ "$(wc -l < "$R/start.out")" -ge 3 ] && break; sleep 0.1; done
[ "$(wc -l < "$R/start.out")" -ge 3 ] || { echo "the cluster did not start"; cat "$R/start.err"; exit 1; }
$B bench http --url "$U" --workload get-existing --fill "$N" --value-size 1024 --ack 2 --from 3 \
  --rate 10 --duration 1s --connections 48 --no-spectrum > "$R/fill.txt" 2>&1
$B bench http --url "$U" --workload mixed:50 --keys "$N" --value-size 1024 --rate "${RATE:-8500}" \
  --duration 60s --connections 128 --json "$R/load.json" --no-spectrum > "$R/load.txt" 2>&1 &
LOAD=$!
# The nodes are the supervisor's children (the fourth joins them).
( for _ in $(seq 55); do
    t=$(date +%s.%N)
    for p in $(pgrep -P "$SUP"); do
      for task in /proc/"$p"/task/*; do
        echo "$t $p $(tr ' ' _ < "$task/comm" 2>/dev/null) $(awk '{print $14 + $15}' "$task/stat" 2>/dev/null)"
      done
    done
    sleep 1
  done ) > "$R/ticks.txt" 2>/dev/null &
SAMPLER=$!
sleep "${ADD_AT:-15}"
date +%s.%N > "$R/tadd"
$B cluster add --dir "$R/c" --no-wait > "$R/add.txt"
wait $LOAD || true
wait $SAMPLER || true
python3 - "$R" <<'PY'
import sys
from collections import defaultdict
r = sys.argv[1]
tadd = float(open(f"{r}/tadd").read())
samples = defaultdict(dict)
for line in open(f"{r}/ticks.txt"):
    f = line.split()
    if len(f) == 4 and f[3].isdigit():
        key = (f[1], f[2])
        samples[f[0]][key] = samples[f[0]].get(key, 0) + int(f[3])
times = sorted(samples, key=float)
pids = sorted({k[0] for t in times for k in samples[t]}, key=int)
print("s from the add | ticks of all nodes | busiest threads (node: thread ticks)")
for a, b in zip(times, times[1:]):
    d = {k: v - samples[a].get(k, 0) for k, v in samples[b].items()}
    total = sum(v for v in d.values() if v > 0)
    top = sorted(d.items(), key=lambda x: -x[1])[:5]
    print(f"{float(a) - tadd:6.1f} | {total:4d} | "
          + ", ".join(f"{pids.index(k[0])}: {k[1]} {v}" for k, v in top))
PY
