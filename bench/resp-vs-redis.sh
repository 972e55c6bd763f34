#!/usr/bin/env bash
# bench/resp-vs-redis.sh — Redis 7 (`--appendonly yes --appendfsync always`)
# and ataman's RESP port (defaults: 1 network thread, WAL fsync) under the
# same redis-benchmark, alternated, on the same machine (docs/RESP.md).
#
#   bench/resp-vs-redis.sh [ATAMAN_BIN] [ROUNDS]
#
# Installs Debian's redis-server and redis-tools with apt-get when missing.
# First checks that redis-cli and `redis-benchmark -t ping,set,get` run
# against ataman with no warning or error. Then, per round, for each
# server in alternating order (redis,ataman then ataman,redis …), a fresh
# server on an empty directory and
#   redis-benchmark -t set,get -r 1000000 -d 100 -c 50 -P {1,16} -n N
# (N: N_P1, default 200000, and N_P16, default 1000000). Prints one TSV
# line per run, then the median per cell and the ratio ataman / redis.
set -euo pipefail

ATAMAN=${1:-target/release/ataman}
ROUNDS=${2:-3}
N_P1=${N_P1:-200000}
N_P16=${N_P16:-1000000}
TMP_PREFIX=ataman-resp-vs-redis
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi
echo "# $(redis-server --version)"
echo "# ataman: $ATAMAN ($("$ATAMAN" --version 2>/dev/null || echo unknown version))"
echo "# nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"

SERVER_PID=""
start_redis() { # port dir
    mkdir -p "$2"
    redis-server --port "$1" --bind 127.0.0.1 --dir "$2" --appendonly yes \
        --appendfsync always --save '' --daemonize no --logfile "$2/redis.log" &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_port "$1"
}
start_ataman() { # port dir
    local http
    http=$(free_port)
    "$ATAMAN" serve --listen "127.0.0.1:$http" --resp-listen "127.0.0.1:$1" \
        --data-dir "$2" >"$TMP/ataman.out" 2>"$TMP/ataman.err" &
    SERVER_PID=$!
    PIDS+=("$SERVER_PID")
    wait_port "$1"
}

# The tools against ataman: no warning, no error.
port=$(free_port)
start_ataman "$port" "$TMP/check"
redis-cli -p "$port" set check-key check-value >"$TMP/cli.out" 2>&1
redis-cli -p "$port" get check-key >>"$TMP/cli.out" 2>&1
redis-cli -p "$port" info server >/dev/null 2>>"$TMP/cli.out"
redis-benchmark -p "$port" -t ping,set,get -n 20000 -q >"$TMP/check.out" 2>&1
if grep -Eiq "warn|err|could not" "$TMP/cli.out" "$TMP/check.out" ||
    ! grep -q "check-value" "$TMP/cli.out"; then
    echo "the tools against ataman printed warnings or errors:" >&2
    cat "$TMP/cli.out" "$TMP/check.out" >&2
    exit 1
fi
echo "# redis-cli and redis-benchmark -t ping,set,get against ataman: no warnings, no errors"
tr '\r' '\n' <"$TMP/check.out" | grep "requests per second" | sed 's/^ */#   /'
stop_pid "$SERVER_PID"

run_one() { # round server pipeline
    local round=$1 server=$2 p=$3 n port dir
    n=$N_P1
    [ "$p" = 1 ] || n=$N_P16
    port=$(free_port)
    dir="$TMP/data-$server"
    rm -rf "$dir"
    "start_$server" "$port" "$dir"
    redis-benchmark -p "$port" -t set,get -n "$n" -r 1000000 -d 100 -c 50 -P "$p" --csv \
        >"$TMP/run.csv" 2>"$TMP/run.err"
    stop_pid "$SERVER_PID"
    python3 - "$TMP/run.csv" "$round" "$server" "$p" <<'PY'
import csv, sys
path, round_, server, p = sys.argv[1:]
for row in csv.reader(open(path)):
    if row and row[0] in ("SET", "GET"):
        print(f"{round_}\t{server}\tP{p}\t{row[0]}\t{float(row[1]):.0f}")
PY
}

printf 'round\tserver\tpipeline\ttest\trps\n'
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="redis ataman"; else order="ataman redis"; fi
    for p in 1 16; do
        for server in $order; do
            run_one "$round" "$server" "$p"
        done
    done
done | tee "$TMP/all.tsv"

python3 - "$TMP/all.tsv" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if f[0] == "round":
        continue
    runs.setdefault((f[2], f[3], f[1]), []).append(float(f[4]))
print("\npipeline\ttest\tredis median\tataman median\tataman/redis")
for p in ("P1", "P16"):
    for t in ("SET", "GET"):
        r = statistics.median(runs.get((p, t, "redis"), [0]))
        a = statistics.median(runs.get((p, t, "ataman"), [0]))
        print(f"{p}\t{t}\t{r:.0f}\t{a:.0f}\t{a / r if r else 0:.2f}")
PY
