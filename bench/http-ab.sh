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
TMP=$(mktemp -d /tmp/ataman-http-ab.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 not open" >&2; exit 1; }

start_nginx() {
    local dir="$TMP/nginx" port
    port=$(free_port)
    mkdir -p "$dir/logs" "$dir/tmp"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$port;
        location / { return 200 "ok"; }
    }
}
EOF
    "$(command -v nginx || echo /usr/sbin/nginx)" -p "$dir" -c "$dir/nginx.conf" 2>"$dir/logs/stderr" &
    PIDS+=("$!")
    wait_port "$port"
    NGINX_URL="http://127.0.0.1:$port"
}

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
