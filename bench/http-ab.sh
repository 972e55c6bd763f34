#!/usr/bin/env bash
# bench/http-ab.sh — two `ataman serve` builds against the same nginx, with
# the same generator, interleaved: the HTTP ceiling of bench/peers section 1
# (closed loop) for a before/after comparison.
#
#   bench/http-ab.sh BEFORE_BIN AFTER_BIN [ROUNDS] [SECONDS]
#
# Each round runs both builds, in alternating order (b,a then a,b ...). For
# each build: nginx (1 worker, `return 200 "ok"`, started once), then a
# fresh `ataman serve` (defaults: 1 network thread, WAL fsync) filled with
# ids 1..FILL_KEYS, then nginx, GET of existing ids, PUT of random ids, each
# SECONDS closed loop after 1 s of warm-up, 64 connections, 2 threads,
# 100-byte values; the ratio of each ataman figure is to the nginx run just
# before it. The generator is GEN (default AFTER_BIN) for every run.
# Prints one TSV line per run and the load average per round.
set -euo pipefail

BEFORE=${1:?before binary}
AFTER=${2:?after binary}
ROUNDS=${3:-3}
SECONDS_RUN=${4:-5}
GEN=${GEN:-$AFTER}
FILL_KEYS=${FILL_KEYS:-100000}
CONNECTIONS=64
THREADS=2
VALUE_BYTES=100
TMP_PREFIX=ataman-http-ab
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"

rps() { # url workload keys -> achieved req/s
    "$GEN" bench http --url "$1" --rate 0 --duration "${SECONDS_RUN}s" --warmup 1s \
        --connections "$CONNECTIONS" --threads "$THREADS" --workload "$2" --keys "$3" \
        --value-size "$VALUE_BYTES" --no-spectrum --json "$TMP/run.json" >/dev/null
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["errors"]==0 and d["non_2xx"]==0, d; print(round(d["achieved_rps"]))' "$TMP/run.json"
}

one_build() { # round label binary
    local round=$1 label=$2 bin=$3 port dir pid nginx get put
    port=$(free_port)
    dir="$TMP/data-$label"
    rm -rf "$dir"
    "$bin" serve --listen "127.0.0.1:$port" --data-dir "$dir" >"$TMP/serve-$label.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_port "$port"
    "$GEN" bench http --url "http://127.0.0.1:$port" --rate 0 --duration 1s \
        --connections "$CONNECTIONS" --threads "$THREADS" --workload get-existing \
        --fill "$FILL_KEYS" --keys "$FILL_KEYS" --value-size "$VALUE_BYTES" --no-spectrum >/dev/null
    nginx=$(rps "$NGINX_URL" get-random "$FILL_KEYS")
    get=$(rps "http://127.0.0.1:$port" get-existing "$FILL_KEYS")
    put=$(rps "http://127.0.0.1:$port" put-random 10000000)
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    python3 -c 'import sys; r,l,n,g,p=sys.argv[1:]; n,g,p=int(n),int(g),int(p); print(f"{r}\t{l}\t{n}\t{g}\t{g/n:.2f}\t{p}\t{p/n:.2f}")' \
        "$round" "$label" "$nginx" "$get" "$put"
}

start_nginx
printf 'round\tbuild\tnginx\tget\tget/nginx\tput\tput/nginx\n'
for round in $(seq 1 "$ROUNDS"); do
    echo "# round $round, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $((round % 2)) = 1 ]; then
        one_build "$round" before "$BEFORE"
        one_build "$round" after "$AFTER"
    else
        one_build "$round" after "$AFTER"
        one_build "$round" before "$BEFORE"
    fi
done
echo "# end, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
