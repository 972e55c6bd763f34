#!/usr/bin/env bash
# bench/request-instructions.sh — instructions per request for RESP GET/SET
# and HTTP GET/PUT at pipeline depths 1 and 16, counted by callgrind (user
# space, every thread of the node), so the figure does not depend on how
# loaded the machine is. The instruction table of issue 32 and the A/B
# tool for the slow log, the hot-key sampler and the image's binary.
#
#   bench/request-instructions.sh [ATAMAN_BIN] [OUT_DIR]
#   BASE=BEFORE_BIN [ROUNDS=R] bench/request-instructions.sh AFTER_BIN [OUT_DIR]
#
# With BASE, a before/after table: BEFORE_BIN and ATAMAN_BIN measured
# alternately, R rounds each (default 1), each run as below on a node of
# its own (dumps in OUT_DIR/base-K and OUT_DIR/new-K); then per cell
# every round's Ir per request, the medians and after/before (less idle).
#
# Environment:
#   CELLS        the cells, PROTO:OP:PIPELINE (default: the eight of
#                resp:{set,get}:{1,16}, http:{put,get}:{1,16})
#   N            requests per cell (default 20000), exactly: bench/fixed_load.py
#                sends them on CONNS (default 4) keep-alive connections
#   KEYS         keys written before counting starts (default 10000; GETs
#                pick among them, seeded, so every GET finds its key)
#   THRESHOLD_US the slow log's threshold set before counting
#                (`POST /v0/slowlog?threshold_us=`); unset: the default
#   IDLE_SEC     an idle phase counted last (default 5): the node's
#                background instructions per second, to read the cells by
#   BASE, ROUNDS the before/after mode above
#
# One node under `valgrind --tool=callgrind --instr-atstart=no` on a fresh
# directory, filled over HTTP (uncounted), then per cell: instrumentation
# on, the cell's N requests, `callgrind_control -d` (a dump per cell: the
# counters start again from zero). Prints per cell the instructions (Ir)
# per request, raw and less the idle rate × the cell's seconds (and keeps
# them in OUT_DIR/result.tsv).
set -euo pipefail

ATAMAN_ARG=${1:-target/release/ataman}
OUT_ARG=${2:-/tmp/ataman-request-instructions}
BASE=${BASE:-}
ROUNDS=${ROUNDS:-1}
CELLS=${CELLS:-resp:set:1 resp:get:1 resp:set:16 resp:get:16 http:put:1 http:get:1 http:put:16 http:get:16}
N=${N:-20000}
CONNS=${CONNS:-4}
KEYS=${KEYS:-10000}
IDLE_SEC=${IDLE_SEC:-5}
TMP_PREFIX=ataman-request-instructions
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
LOAD=$(dirname "$0")/fixed_load.py

# A node under valgrind starts some 50 times slower: wait longer than
# common.sh's wait_port (at most 5 minutes).
wait_port_slow() { for _ in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.5; done; echo "port $1 not open" >&2; exit 1; }

# measure BIN OUT: one run of the cells on a fresh node of BIN, dumps and
# result.tsv in OUT.
measure() {
ATAMAN=$1
OUT=$2
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.out* "$OUT/load.out"
rm -rf "$TMP/data"
http=$(free_port)
resp=$(free_port)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$OUT/callgrind.out" \
    "$ATAMAN" serve --listen "127.0.0.1:$http" --resp-listen "127.0.0.1:$resp" \
    --data-dir "$TMP/data" >"$OUT/node.out" 2>"$OUT/node.err" &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_port_slow "$http"
wait_port_slow "$resp"
python3 "$LOAD" http put "$http" "$KEYS" --sequential --keys "$KEYS" --pipeline 16 >/dev/null
if [ -n "${THRESHOLD_US:-}" ]; then
    curl -sf -X POST "http://127.0.0.1:$http/v0/slowlog?threshold_us=$THRESHOLD_US" >"$OUT/slowlog-set.json"
fi
threshold=$(curl -sf "http://127.0.0.1:$http/v0/slowlog?limit=0" | python3 -c 'import json,sys; print(json.load(sys.stdin)["threshold_us"])')
echo "# $ATAMAN, slow log threshold_us $threshold, N $N, conns $CONNS, keys $KEYS, nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"

: >"$OUT/cells.tsv"
dump=0
for cell in $CELLS; do
    IFS=: read -r proto op pipeline <<<"$cell"
    port=$http
    [ "$proto" = resp ] && port=$resp
    callgrind_control -i on "$SERVER_PID" >/dev/null 2>&1
    t0=$(date +%s.%N)
    python3 "$LOAD" "$proto" "$op" "$port" "$N" --conns "$CONNS" --pipeline "$pipeline" \
        --keys "$KEYS" >>"$OUT/load.out"
    t1=$(date +%s.%N)
    callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
    dump=$((dump + 1))
    printf '%s\t%s\t%s\n' "$cell" "$(echo "$t1 - $t0" | bc)" "$dump" >>"$OUT/cells.tsv"
done
t0=$(date +%s.%N)
sleep "$IDLE_SEC"
t1=$(date +%s.%N)
callgrind_control -d "$SERVER_PID" >/dev/null 2>&1
dump=$((dump + 1))
printf 'idle\t%s\t%s\n' "$(echo "$t1 - $t0" | bc)" "$dump" >>"$OUT/cells.tsv"
slowlog=$(curl -sf "http://127.0.0.1:$http/v0/slowlog?limit=1" | python3 -c 'import json,sys; d=json.load(sys.stdin); e=d["entries"]; print(d["len"], e[0]["id"] + 1 if e else 0)')
stop_pid "$SERVER_PID"
echo "# slow log at the end: entries held, entries recorded since the start: $slowlog"

python3 - "$OUT" "$N" <<'PY'
import glob, os, sys
out, n = sys.argv[1], int(sys.argv[2])
def total_ir(path):
    events = totals = None
    for line in open(path):
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("totals:") or line.startswith("summary:"):
            totals = [int(x) for x in line.split()[1:]]
    return dict(zip(events, totals))["Ir"]
def dump_path(i):
    # callgrind names the k-th dump of process P `callgrind.out.P.k`
    # when --callgrind-out-file has no %p.
    paths = glob.glob(os.path.join(out, f"callgrind.out*.{i}"))
    if len(paths) != 1:
        sys.exit(f"dump {i}: {paths}")
    return paths[0]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, "cells.tsv"))]
idle_cell, idle_sec, idle_dump = rows[-1]
idle_rate = total_ir(dump_path(idle_dump)) / float(idle_sec)
print(f"# idle: {idle_rate:.0f} Ir/s in the background")
print("cell\tseconds\tIr\tIr/request\tIr/request less idle")
with open(os.path.join(out, "result.tsv"), "w") as result:
    for cell, sec, d in rows[:-1]:
        ir = total_ir(dump_path(d))
        per, less = ir / n, (ir - idle_rate * float(sec)) / n
        print(f"{cell}\t{float(sec):.1f}\t{ir}\t{per:.0f}\t{less:.0f}")
        result.write(f"{cell}\t{per:.1f}\t{less:.1f}\n")
PY
}

if [ -z "$BASE" ]; then
    measure "$ATAMAN_ARG" "$OUT_ARG"
    exit 0
fi
for round in $(seq 1 "$ROUNDS"); do
    measure "$BASE" "$OUT_ARG/base-$round"
    measure "$ATAMAN_ARG" "$OUT_ARG/new-$round"
done
echo "# before: $BASE; after: $ATAMAN_ARG; $ROUNDS round(s), alternated; Ir per request less idle"
python3 - "$OUT_ARG" "$ROUNDS" <<'PY'
import os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def result(name):
    rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(out, name, "result.tsv"))]
    return {cell: float(less) for cell, _per, less in rows}
base = [result(f"base-{r}") for r in range(1, rounds + 1)]
new = [result(f"new-{r}") for r in range(1, rounds + 1)]
cols = [f"before {r}" for r in range(1, rounds + 1)] + [f"after {r}" for r in range(1, rounds + 1)]
print("| cell | " + " | ".join(cols) + " | before | after | after/before |")
print("| --- " * (len(cols) + 4) + "|")
for cell in base[0]:
    b = statistics.median(x[cell] for x in base)
    a = statistics.median(x[cell] for x in new)
    figures = [f"{x[cell]:,.0f}" for x in base + new]
    print(f"| {cell} | " + " | ".join(figures) + f" | {b:,.0f} | {a:,.0f} | {a / b:.3f} ({a - b:+,.0f}) |")
PY
