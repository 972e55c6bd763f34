#!/bin/bash
# Client errors around layout changes (issue 16; docs/bench-log/
# 2026-11-26-layout-grow-5.md): a local 3-node cluster (R = 3) with 30,000
# keys of 1 KiB, a constant-rate 50/50 read/write load (RATE, default 6000
# req/s, on 128 connections) to the three first nodes for LOAD_SEC
# (default 180) seconds, and meanwhile as many cycles as fit of adding a
# fourth node (`ataman cluster add`, which waits until settled), 2 s, then
# removing it (`cluster remove`), 2 s. Prints each cycle's times (seconds
# from the load's start), every node's `ataman_peer_requests_fenced_total`,
# and the load's non-2xx and errors, with the seconds they fell in.
# Usage: bench/layout-cycle-errors.sh [BINARY], from the repository root
# after `cargo build --release -p ataman --bin ataman`. Loopback ports
# BASE_PORT (19801) and up, and +1000 and up.
set -u
B=${1:-target/release/ataman}
BASE=${BASE_PORT:-19801}
LOAD_SEC=${LOAD_SEC:-180}
R=${BENCH_DIR:-/tmp/ataman-cycle-bench}; rm -rf "$R"; mkdir -p "$R"
U="http://127.0.0.1:$BASE,http://127.0.0.1:$((BASE + 1)),http://127.0.0.1:$((BASE + 2))"
$B cluster start --nodes 3 --base-port "$BASE" --dir "$R/c" -- --anti-entropy-interval-ms 0 \
  > "$R/start.out" 2> "$R/start.err" &
SUP=$!
LOAD=
trap 'kill $LOAD $SUP 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ "$(wc -l < "$R/start.out")" -ge 3 ] && break; sleep 0.1; done
[ "$(wc -l < "$R/start.out")" -ge 3 ] || { echo "the cluster did not start"; cat "$R/start.err"; exit 1; }
$B bench http --url "$U" --workload get-existing --fill 30000 --value-size 1024 --ack 2 --from 3 \
  --rate 10 --duration 1s --connections 16 --no-spectrum > "$R/fill.txt" 2>&1
$B bench http --url "$U" --workload mixed:50 --keys 30000 --value-size 1024 --rate "${RATE:-6000}" \
  --duration "${LOAD_SEC}s" --connections 128 --json "$R/load.json" --no-spectrum > "$R/load.txt" 2>&1 &
LOAD=$!
T0=$(date +%s.%N)
since() { python3 -c "print(round($(date +%s.%N) - $T0, 1))"; }
sleep 5
c=0
next=3
while [ "$(python3 -c "print(int($(date +%s.%N) - $T0))")" -lt $((LOAD_SEC - 30)) ]; do
  c=$((c + 1))
  ta=$(since); $B cluster add --dir "$R/c" > "$R/add-$c.txt" 2>&1; tb=$(since)
  sleep 2
  $B cluster remove --dir "$R/c" --node "$next" > "$R/remove-$c.txt" 2>&1; tc=$(since)
  echo "cycle $c: add at $ta s, settled at $tb s; removed by $tc s"
  next=$((next + 1))
  sleep 2
done
for p in 0 1 2; do
  f=$(curl -s "http://127.0.0.1:$((BASE + p))/metrics" | awk '/^ataman_peer_requests_fenced_total/ {print $2}')
  echo "node $p: ataman_peer_requests_fenced_total ${f:-(none: an older binary)}"
done
wait $LOAD
LOAD=
python3 - "$R" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/load.json"))
bad = [(x["second"], x["non_2xx"] + x["errors"]) for x in d["series"] if x["non_2xx"] or x["errors"]]
print(f"== {d['requests']} requests: non-2xx {d['non_2xx']}, errors {d['errors']}; "
      f"seconds with any (second, count): {bad}")
PY
