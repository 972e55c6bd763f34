#!/bin/bash
# Issue 37's register benchmark (docs/BENCHMARKS.md, "The consensus
# register against a plain quorum write"): a local 3-node cluster
# (`ataman cluster start`, R = 3, the register on by default), RESP through
# node 0, redis-benchmark side by side in one run, alternated ROUNDS times:
#   - uncontended latency: one client, `SET` (a plain quorum write, ack 2
#     of 3) against `INCR` of random keys (a register read-modify-write:
#     prepare, accept, commit), p50 of each;
#   - throughput on uniform keys: 50 clients, `SET` against `INCR` of
#     random keys out of 100,000 (`-r`), requests per second;
#   - one hot key: 50 clients `INCR` of one key, requests per second and
#     the counter's end against the requests sent.
# Then the register store's size on disk (`<data-dir>/register`) after the
# run, per node. Usage: bench/register-vs-quorum.sh [REQUESTS] (default
# 20000), from the repository root after `cargo build --release`.
# Ports 19700-19702 (HTTP) and 20700-20702 (RESP) on 127.0.0.1.
set -eu
B=${ATAMAN:-target/release/ataman}
N=${1:-20000}
ROUNDS=${ROUNDS:-2}
TMP_PREFIX=ataman-register-bench
. "$(dirname "$0")/common.sh"
"$B" cluster start --nodes 3 --base-port 19700 --resp-base-port 20700 --dir "$TMP/cluster" >"$TMP/cluster.out" 2>"$TMP/cluster.err" &
PIDS+=("$!")
for p in 19700 19701 19702 20700 20701 20702; do wait_port "$p"; done
sleep 1
rb() { redis-benchmark -h 127.0.0.1 -p 20700 "$@" -q --csv 2>/dev/null; }
# a column of the last line of redis-benchmark --csv: 1 rps, 4 p50_latency_ms, 6 p99_latency_ms
field() { python3 -c "import csv,sys; r=list(csv.reader(sys.stdin)); print(r[-1][$1])"; }
for round in $(seq 1 "$ROUNDS"); do
  for t in set incr; do
    line=$(rb -t $t -c 1 -n $((N / 4)) -r 1000000 -d 100)
    echo "round $round one-client $t rps $(echo "$line" | field 1) p50_ms $(echo "$line" | field 4) p99_ms $(echo "$line" | field 6)"
  done
  for t in set incr; do
    line=$(rb -t $t -c 50 -n "$N" -r 100000 -d 100)
    echo "round $round 50-clients-uniform $t rps $(echo "$line" | field 1) p50_ms $(echo "$line" | field 4) p99_ms $(echo "$line" | field 6)"
  done
  redis-cli -p 20700 DEL hot >/dev/null
  line=$(redis-benchmark -h 127.0.0.1 -p 20700 -c 50 -n "$N" -q --csv INCR hot 2>/dev/null)
  end=$(redis-cli -p 20701 GET hot)
  echo "round $round 50-clients-one-key incr rps $(echo "$line" | field 1) p50_ms $(echo "$line" | field 4) counter $end of $N"
done
for i in 0 1 2; do
  echo "register store node-$i: $(du -sk "$TMP/cluster/node-$i/register" | cut -f1) KiB; data $(du -sk "$TMP/cluster/node-$i" | cut -f1) KiB"
done
