#!/usr/bin/env bash
# bench/latency-ladder.sh — p99 against offered rate, as a share of each
# server's own closed-loop ceiling, for nginx (the machine's HTTP ceiling)
# and an `ataman serve` node (GET of existing ids, durable PUT of random
# ids), with the same generator on the same machine.
#
#   bench/latency-ladder.sh [ATAMAN_BIN] [ROUNDS] [SHARES]
#   LADDER_CLUSTER=1 bench/latency-ladder.sh ...   # also a 3-node cluster
#
# For each subject: a closed-loop run gives its ceiling C (SECONDS_RUN s
# after 1 s of warm-up), then one constant-rate run at each share of C
# (default "0.4 0.6 0.8"), RATE_SECONDS (10) after 1 s of warm-up, 64 connections, 2
# generator threads. Prints one TSV line per run: the corrected p99 (from
# the planned send time, as wrk2), the uncorrected p99 (from the actual
# send), the send lag p99, and how busy the machine's CPUs were during the
# run (from /proc/stat: everything but idle and iowait, both CPUs).
# Answers "at what share of its own ceiling does a server keep p99 under
# 5 ms here?", so a latency target can be told apart from the machine's.
set -euo pipefail

ATAMAN=${1:-target/release/ataman}
ROUNDS=${2:-1}
SHARES=${3:-"0.4 0.6 0.8"}
SECONDS_RUN=${SECONDS_RUN:-8}
RATE_SECONDS=${RATE_SECONDS:-10}
FILL_KEYS=${FILL_KEYS:-100000}
CONNECTIONS=64
THREADS=2
VALUE_BYTES=100
TMP_PREFIX=ataman-ladder
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"

cpu_ticks() { head -1 /proc/stat; }

# run URL WORKLOAD KEYS RATE SECONDS -> "achieved p99 p99_uncorrected lag_p99 cpu_busy_pct"
run() {
    local before after
    before=$(cpu_ticks)
    "$ATAMAN" bench http --url "$1" --rate "$4" --duration "${5}s" --warmup 1s \
        --connections "$CONNECTIONS" --threads "$THREADS" --workload "$2" --keys "$3" \
        --value-size "$VALUE_BYTES" --no-spectrum --json "$TMP/run.json" ${ACK_FROM:-} >/dev/null
    after=$(cpu_ticks)
    python3 - "$TMP/run.json" "$before" "$after" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["errors"] == 0 and d["non_2xx"] == 0, {k: d[k] for k in ("errors", "non_2xx", "timeouts")}
b = [int(x) for x in sys.argv[2].split()[1:]]
a = [int(x) for x in sys.argv[3].split()[1:]]
delta = [y - x for x, y in zip(b, a)]
busy = 100.0 * (sum(delta) - delta[3] - delta[4]) / max(1, sum(delta))
print(f'{d["achieved_rps"]:.0f}\t{d["latency_ms"]["p99"]:.2f}\t{d["uncorrected_latency_ms"]["p99"]:.2f}\t{d["send_lag_ms"]["p99"]:.2f}\t{busy:.0f}')
EOF
}

# ladder NAME URL WORKLOAD KEYS [FRESH]: with FRESH (a function), it is
# called before each run and sets NODE_URL, the URL to use (a node started
# anew). Not in a subshell: it must keep track of the node it started.
ladder() {
    local name=$1 url=$2 workload=$3 keys=$4 fresh=${5:-} ceiling line rate
    if [ -n "$fresh" ]; then "$fresh"; url=$NODE_URL; fi
    line=$(run "$url" "$workload" "$keys" 0 "$SECONDS_RUN")
    ceiling=$(cut -f1 <<<"$line")
    printf '%s\t%s\tclosed\t%s\n' "$ROUND" "$name" "$line"
    for share in $SHARES; do
        rate=$(python3 -c "print(round($ceiling * $share))")
        if [ -n "$fresh" ]; then "$fresh"; url=$NODE_URL; fi
        printf '%s\t%s\t%s\t%s\n' "$ROUND" "$name" "$share" "$(run "$url" "$workload" "$keys" "$rate" "$RATE_SECONDS")"
    done
}

NODE_PID=
NODE_URL=
# Starts a node on an empty data directory (stopping the previous one) and
# sets NODE_URL: each PUT run starts without the previous run's flush and
# compaction debt, as a user's first load test would.
fresh_node() {
    local port dir="$TMP/data"
    stop_pid "$NODE_PID"
    rm -rf "$dir"
    port=$(free_port)
    "$ATAMAN" serve --listen "127.0.0.1:$port" --data-dir "$dir" >"$TMP/serve.log" 2>&1 &
    NODE_PID=$!
    PIDS+=("$NODE_PID")
    wait_port "$port"
    NODE_URL="http://127.0.0.1:$port"
}

CLUSTER_PID=
# Starts a 3-node cluster on empty directories (stopping the previous one)
# and sets NODE_URL to its first node.
fresh_cluster() {
    local port dir="$TMP/cluster"
    stop_pid "$CLUSTER_PID"
    rm -rf "$dir"
    port=$(python3 -c 'import socket
for p in range(19700, 19900, 3):
    try:
        ss = [socket.socket() for _ in range(3)]
        for i, s in enumerate(ss): s.bind(("127.0.0.1", p + i))
        [s.close() for s in ss]; print(p); break
    except OSError:
        [s.close() for s in ss]')
    "$ATAMAN" cluster start --nodes 3 --base-port "$port" --dir "$dir" >"$TMP/cluster.log" 2>&1 &
    CLUSTER_PID=$!
    PIDS+=("$CLUSTER_PID")
    for p in "$port" $((port + 1)) $((port + 2)); do wait_port "$p"; done
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$port/v0/status" >/dev/null 2>&1 && break
        sleep 0.1
    done
    NODE_URL="http://127.0.0.1:$port"
}

start_nginx
printf 'round\tsubject\tshare\treq/s\tp99 ms\tp99 uncorrected ms\tsend lag p99 ms\tCPU busy %%\n'
for ROUND in $(seq 1 "$ROUNDS"); do
    echo "# round $ROUND, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    ladder nginx "$NGINX_URL" get-random "$FILL_KEYS"
    fresh_node
    url=$NODE_URL
    "$ATAMAN" bench http --url "$url" --rate 0 --duration 1s \
        --connections "$CONNECTIONS" --threads "$THREADS" --workload get-existing \
        --fill "$FILL_KEYS" --keys "$FILL_KEYS" --value-size "$VALUE_BYTES" --no-spectrum >/dev/null
    ladder ataman-get "$url" get-existing "$FILL_KEYS"
    ladder ataman-put "" put-random 10000000 fresh_node
    if [ "${LADDER_CLUSTER:-0}" = 1 ]; then
        ACK_FROM="--ack 2 --from 3" ladder cluster-put-2/3 "" put-random 10000000 fresh_cluster
        stop_pid "$CLUSTER_PID"
        CLUSTER_PID=
    fi
done
echo "# end, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
