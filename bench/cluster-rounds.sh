#!/bin/bash
# One round of the cluster benchmark of docs/BENCHMARKS.md ("What replication costs"):
# a single node, then a local 3-node cluster (`ataman cluster start`), same
# generator, closed loop, 64 connections, 2 generator threads; PUT and GET at
# 2/3 and 1/1, through one node and through all three, and 2/3 PUT at a
# constant 80% of its closed-loop rate. Prints one line per run; JSON reports
# stay in $R. Usage: bench/cluster-rounds.sh [DURATION] (default 8s), from the
# repository root after `cargo build --release`. Loopback ports 19600-19612.
set -u
B=${ATAMAN:-target/release/ataman}
D=${1:-8s}
R=${BENCH_DIR:-/tmp/ataman-cluster-bench}; rm -rf $R; mkdir -p $R
run() { # label url extra...
  local label=$1 url=$2; shift 2
  local rate=0
  if [ "${@: -2:1}" = "--rate-override" ]; then rate=${@: -1}; set -- "${@:1:$(($#-2))}"; fi
  $B bench http --url "$url" --rate $rate --connections 64 --threads 2 --duration $D --json $R/$label.json "$@" > $R/$label.txt 2>&1
  python3 -c "
import json,sys
j=json.load(open('$R/$label.json'))
print('%-14s rps %8.0f non2xx %6d errors %5d p50 %7.3f p99 %7.3f ms' % ('$label', j['achieved_rps'], j['non_2xx'], j['errors'], j['latency_ms']['p50'], j['latency_ms']['p99']))
"
}
# single node
$B serve --listen 127.0.0.1:19600 --data-dir $R/single > /dev/null 2>&1 &
S=$!; sleep 1
run single-put http://127.0.0.1:19600 --workload put-random --keys 10000000
run single-get http://127.0.0.1:19600 --workload get-existing --fill 20000
kill $S; wait $S 2>/dev/null
# cluster
$B cluster start --nodes 3 --base-port 19610 --dir $R/cluster > /dev/null 2>$R/cluster.err &
C=$!; sleep 3
ALL=http://127.0.0.1:19610,http://127.0.0.1:19611,http://127.0.0.1:19612
run c-put-23-one http://127.0.0.1:19610 --workload put-random --ack 2 --from 3 --keys 10000000
RATE=$(python3 -c "import json; print(int(0.8*json.load(open('$R/c-put-23-one.json'))['achieved_rps']))")
run c-put-23-80pct http://127.0.0.1:19610 --workload put-random --ack 2 --from 3 --keys 10000000 --rate-override $RATE
run c-put-11-one http://127.0.0.1:19610 --workload put-random --ack 1 --from 1 --keys 10000000
run c-put-23-all $ALL --workload put-random --ack 2 --from 3 --keys 10000000
run c-put-11-all $ALL --workload put-random --ack 1 --from 1 --keys 10000000
run c-get-23-one http://127.0.0.1:19610 --workload get-existing --fill 20000 --ack 2 --from 3
run c-get-11-all $ALL --workload get-existing --fill 20000 --ack 1 --from 1
run c-get-23-all $ALL --workload get-existing --fill 20000 --ack 2 --from 3
kill -TERM $C; wait $C 2>/dev/null
