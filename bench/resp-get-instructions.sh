#!/usr/bin/env bash
# bench/resp-get-instructions.sh — instructions
# per RESP GET, counted by callgrind, so the figure does not depend on how
# loaded the machine is.
#
#   bench/resp-get-instructions.sh [ATAMAN_BIN] [OUT_DIR]
#
# A fresh node under `valgrind --tool=callgrind --instr-atstart=no`:
# 1. filled as bench/resp-vs-redis.sh's P16 SET run does, uncounted:
#      redis-benchmark -t set -n $FILL_N -r 1000000 -d 100 -c 50 -P 16
#    (the default 300000 leaves ~260k keys, all in the live memtable, the
#    state a GET run right after the SET run reads);
# 2. instrumentation switched on (`callgrind_control -i on`), then
#      redis-benchmark -t get -n $GET_N -r 1000000 -d 100 -c 50 -P $P
#    and the counters dumped: total Ir / GET_N is the instructions per GET
#    (every thread of the node, idle ones included).
set -euo pipefail

ATAMAN=${1:-target/release/ataman}
OUT=${2:-/tmp/ataman-callgrind}
FILL_N=${FILL_N:-300000}
GET_N=${GET_N:-100000}
P=${P:-16}
TMP_PREFIX=ataman-get-instructions
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
mkdir -p "$OUT"

# A node under valgrind starts some 50 times slower: wait longer
# than common.sh's wait_port (at most 5 minutes).
wait_port_slow() { for _ in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.5; done; echo "port $1 not open" >&2; exit 1; }

start_node() { # port dir [wrapper…]
    local port=$1 dir=$2 http
    shift 2
    http=$(free_port)
    "$@" "$ATAMAN" serve --listen "127.0.0.1:$http" --resp-listen "127.0.0.1:$port" \
        --data-dir "$dir" >"$OUT/node.out" 2>"$OUT/node.err" &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_port_slow "$port"
}

port=$(free_port)
start_node "$port" "$TMP/data" valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$OUT/callgrind.out"
redis-benchmark -p "$port" -t set -n "$FILL_N" -r 1000000 -d 100 -c 50 -P 16 -q \
    >"$OUT/fill.out" 2>&1
callgrind_control -i on "$SERVER_PID" >/dev/null
redis-benchmark -p "$port" -t get -n "$GET_N" -r 1000000 -d 100 -c 50 -P "$P" -q \
    >"$OUT/bench.out" 2>&1
callgrind_control -d "$SERVER_PID" >/dev/null
stop_pid "$SERVER_PID"
dump=$(find "$OUT" -name 'callgrind.out.*' -newer "$OUT/bench.out" | sort | head -1)
[ -n "$dump" ] || dump=$(find "$OUT" -name 'callgrind.out*' | sort | tail -1)
callgrind_annotate "$dump" >"$OUT/annotate.txt" 2>/dev/null || true
python3 - "$dump" "$GET_N" <<'PY'
import sys
path, n = sys.argv[1], int(sys.argv[2])
events = totals = None
for line in open(path):
    if line.startswith("events:"):
        events = line.split()[1:]
    elif line.startswith("totals:") or line.startswith("summary:"):
        totals = [int(x) for x in line.split()[1:]]
if not events or not totals:
    sys.exit(f"no totals in {path}")
for name, total in zip(events, totals):
    print(f"{name}\t{total}\t{total / n:.1f} per GET")
PY
echo "# dump: $dump"
