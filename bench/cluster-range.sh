#!/bin/bash
# Cluster-wide range cost (docs/BENCHMARKS.md, "Cluster-wide range"): a local
# 3-node cluster, N keys (default 1000000, 8-byte values) written 2/3
# (every node holds every key); node 0 is restarted (so its peak RSS counts
# the ranges only), then through node 0: the node-local range, a cluster
# range with the defaults (ack=2 of from=3: 2 streams), one with ack=3
# (3 streams), and a cluster range read by a client throttled to 1 MB/s for
# 10 s (back-pressure: memory must stay flat), each range REPEAT (3) times
# in turn. Prints keys, wall time,
# keys/s, and node 0's VmHWM / VmRSS (/proc/PID/status) after each.
# Usage: bench/cluster-range.sh [N], from the repository root after
# `cargo build --release`. Loopback ports 19630-19632.
set -eu
B=${ATAMAN:-target/release/ataman}
N=${1:-1000000}
R=${BENCH_DIR:-/tmp/ataman-range-bench}; rm -rf $R; mkdir -p $R
P=(19630 19631 19632)
CLUSTER=http://127.0.0.1:${P[0]},http://127.0.0.1:${P[1]},http://127.0.0.1:${P[2]}
PIDS=()
start() { # node
  $B serve --listen 127.0.0.1:${P[$1]} --data-dir $R/node-$1 --cluster $CLUSTER \
    --self http://127.0.0.1:${P[$1]} --wal-mode none --anti-entropy-interval-ms 0 \
    > /dev/null 2>> $R/node-$1.log &
  PIDS[$1]=$!
  for _ in $(seq 100); do
    $B ctl --url http://127.0.0.1:${P[$1]} status > /dev/null 2>&1 && return; sleep 0.1
  done
  echo "node $1 did not start"; exit 1
}
stop() { kill -TERM ${PIDS[$1]}; wait ${PIDS[$1]} || true; }
mem() { grep -E 'VmHWM|VmRSS' /proc/${PIDS[0]}/status | tr -s ' \t' ' ' | tr '\n' ' '; echo; }
count_chunks() { # file: chunks and body bytes of a raw chunked body
  python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
pos, chunks, body = 0, 0, 0
while True:
    eol = data.index(b"\r\n", pos)
    size = int(data[pos:eol], 16)
    if size == 0:
        break
    chunks += 1
    body += size
    pos = eol + 2 + size + 2
print(chunks, body)
PY
}
range() { # label query
  local t0=$(date +%s%N)
  curl -sS --raw "http://127.0.0.1:${P[0]}/v0/entities?start=0$2" -o $R/body
  local t1=$(date +%s%N)
  local ms=$(( (t1 - t0) / 1000000 ))
  local out=$(count_chunks $R/body)
  local keys=${out%% *}
  echo "== $1: $keys keys, $(( ${out##* } / 1048576 )) MiB, $ms ms, $(( keys * 1000 / (ms > 0 ? ms : 1) )) keys/s; node 0: $(mem)"
}
trap 'for p in ${PIDS[@]}; do kill $p 2>/dev/null || true; done' EXIT
for i in 0 1 2; do start $i; done
$B bench http --url $CLUSTER --workload get-existing --fill $N --ack 2 --from 3 \
  --value-size 8 --rate 10 --duration 1s --connections 48 --no-spectrum > $R/fill.txt 2>&1
grep -i fill $R/fill.txt || true
stop 0; start 0
echo "== node 0 restarted: $(mem)"
for run in $(seq ${REPEAT:-3}); do
  range "run $run node-local" ""
  range "run $run cluster ack=2 from=3 (2 streams)" "&cluster=1"
  range "run $run cluster ack=3 from=3 (3 streams)" "&cluster=1&ack=3&from=3"
done
curl -sS --limit-rate 1M "http://127.0.0.1:${P[0]}/v0/entities?start=0&cluster=1&ack=3" \
  -o /dev/null --max-time 10 || true
echo "== cluster range read at 1 MB/s for 10 s, then abandoned: node 0: $(mem)"
curl -sS "http://127.0.0.1:${P[0]}/metrics" | grep -E '^ataman_cluster_range' || true
