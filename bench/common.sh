# bench/common.sh — sourced by the bench scripts: a scratch directory, the
# processes to stop on exit, free ports, and nginx as the machine's HTTP
# ceiling (one worker, keep-alive, a fixed 2-byte answer).
#
# Before sourcing, set TMP_PREFIX (the scratch directory's name prefix).
# Provides: TMP, PIDS, free_port, wait_port PORT, stop_pid PID, start_nginx
# (sets NGINX_URL).

TMP=$(mktemp -d "/tmp/${TMP_PREFIX:-ataman-bench}.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 not open" >&2; exit 1; }
stop_pid() { if [ -n "$1" ]; then kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; fi; }

start_nginx() {
    local dir="$TMP/nginx" port
    port=$(free_port)
    mkdir -p "$dir/logs" "$dir/tmp"
    cat >"$dir/nginx.conf" <<NGINX
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
NGINX
    "$(command -v nginx || echo /usr/sbin/nginx)" -p "$dir" -c "$dir/nginx.conf" 2>"$dir/logs/stderr" &
    PIDS+=("$!")
    wait_port "$port"
    NGINX_URL="http://127.0.0.1:$port"
}
