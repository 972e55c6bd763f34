#!/bin/bash
# Anti-entropy repair cost (docs/BENCHMARKS.md, "What anti-entropy costs"): a local
# 3-node cluster (hints off, rounds only on demand); node 2 is stopped while
# N keys (default 100000, 100-byte values) are written 2/3 through nodes 0
# and 1; node 2 restarts and `ataman ctl repair` runs on it. Then a repair of
# the converged cluster, then one after node 2 missed only 10 of the keys'
# overwrites. Prints each repair's wall time and ctl report (bytes per peer).
# Usage: bench/antientropy-repair.sh [N], from the repository root after
# `cargo build --release`. Loopback ports 19620-19622.
set -eu
B=${ATAMAN:-target/release/ataman}
N=${1:-100000}
R=${BENCH_DIR:-/tmp/ataman-ae-bench}; rm -rf $R; mkdir -p $R
P=(19620 19621 19622)
CLUSTER=http://127.0.0.1:${P[0]},http://127.0.0.1:${P[1]},http://127.0.0.1:${P[2]}
PIDS=()
start() { # node
  $B serve --listen 127.0.0.1:${P[$1]} --data-dir $R/node-$1 --cluster $CLUSTER \
    --self http://127.0.0.1:${P[$1]} --hints-bytes-max 0 --anti-entropy-interval-ms 0 \
    > /dev/null 2>> $R/node-$1.log &
  PIDS[$1]=$!
  for _ in $(seq 100); do
    $B ctl --url http://127.0.0.1:${P[$1]} status > /dev/null 2>&1 && return; sleep 0.1
  done
  echo "node $1 did not start"; exit 1
}
stop() { kill -TERM ${PIDS[$1]}; wait ${PIDS[$1]} || true; }
repair() { # label
  local t0=$(date +%s%N)
  $B ctl --url http://127.0.0.1:${P[2]} repair --timeout-ms 600000 > $R/$1.txt
  local t1=$(date +%s%N)
  echo "== $1: $(( (t1 - t0) / 1000000 )) ms wall (ctl, POST to report)"
  cat $R/$1.txt
}
trap 'for p in ${PIDS[@]}; do kill $p 2>/dev/null || true; done' EXIT
for i in 0 1 2; do start $i; done
stop 2
$B bench http --url http://127.0.0.1:${P[0]},http://127.0.0.1:${P[1]} --workload get-existing \
  --fill $N --ack 2 --from 3 --value-size 100 --rate 10 --duration 1s --connections 64 \
  --no-spectrum > $R/fill.txt 2>&1
grep -i fill $R/fill.txt || true
du -sh $R/node-0 | sed 's/^/node 0 data: /'
start 2
repair missed-$N
repair converged
stop 2
for i in $(seq 10); do
  $B ctl --url http://127.0.0.1:${P[0]} --ack 2 --from 3 put $((i * 997)) overwritten > /dev/null
done
start 2
repair missed-10
