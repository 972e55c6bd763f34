#!/usr/bin/env bash
# bench/http-get-instructions.sh — instructions per HTTP GET, counted by
# callgrind (the companion of bench/resp-get-instructions.sh, to check
# that a change for RESP costs HTTP nothing).
#
#   bench/http-get-instructions.sh [ATAMAN_BIN] [OUT_DIR]
#
# A node on a copy of $FILL_DIR (default: filled here with
# `ataman bench http --workload put-random` for $FILL_KEYS keys) under
# `valgrind --tool=callgrind`; counters zeroed once its port is open; then
#   ataman bench http --workload get-random --keys $FILL_KEYS
#     --rate $RATE --duration $SECONDS --connections 16
# (open loop, so the request count is about RATE × SECONDS; the report's
# count is printed too). Prints total Ir / (RATE × SECONDS).
set -euo pipefail

ATAMAN=${1:-target/release/ataman}
OUT=${2:-/tmp/ataman-callgrind-http}
FILL_KEYS=${FILL_KEYS:-100000}
RATE=${RATE:-1000}
SECONDS_RUN=${SECONDS_RUN:-10}
TMP_PREFIX=ataman-http-instructions
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
mkdir -p "$OUT"
FILL_DIR=${FILL_DIR:-$TMP/fill}

# A node under valgrind replays its WAL some 50 times slower: wait longer
# than common.sh's wait_port (at most 5 minutes).
wait_port_slow() { for _ in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.5; done; echo "port $1 not open" >&2; exit 1; }

start_node() { # port dir [wrapper…]
    local port=$1 dir=$2
    shift 2
    "$@" "$ATAMAN" serve --listen "127.0.0.1:$port" --data-dir "$dir" \
        >"$OUT/node.out" 2>"$OUT/node.err" &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_port_slow "$port"
}

if [ ! -d "$FILL_DIR" ]; then
    port=$(free_port)
    start_node "$port" "$FILL_DIR"
    "$ATAMAN" bench http --url "http://127.0.0.1:$port" --workload put-random \
        --keys "$FILL_KEYS" --value-size 100 --rate 0 --duration 5s >/dev/null 2>&1
    stop_pid "$SERVER_PID"
fi
rm -rf "$TMP/data"
cp -a "$FILL_DIR" "$TMP/data"

port=$(free_port)
start_node "$port" "$TMP/data" valgrind --tool=callgrind \
    --callgrind-out-file="$OUT/callgrind.out"
callgrind_control -z "$SERVER_PID" >/dev/null
"$ATAMAN" bench http --url "http://127.0.0.1:$port" --workload get-random \
    --keys "$FILL_KEYS" --rate "$RATE" --duration "${SECONDS_RUN}s" --connections 16 \
    --no-spectrum >"$OUT/bench.out" 2>&1
callgrind_control -d "$SERVER_PID" >/dev/null
stop_pid "$SERVER_PID"
dump=$(find "$OUT" -name 'callgrind.out.*' -newer "$OUT/bench.out" | sort | head -1)
[ -n "$dump" ] || dump=$(find "$OUT" -name 'callgrind.out*' | sort | tail -1)
callgrind_annotate "$dump" >"$OUT/annotate.txt" 2>/dev/null || true
grep -iE "requests|completed|errors|timeouts" "$OUT/bench.out" | head -5 || true
n=$((RATE * SECONDS_RUN))
python3 - "$dump" "$n" <<'PY'
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
    print(f"{name}\t{total}\t{total / n:.1f} per request (of {n} planned)")
PY
echo "# dump: $dump"
