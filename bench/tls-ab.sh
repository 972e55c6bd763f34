#!/usr/bin/env bash
# bench/tls-ab.sh — TLS against plaintext in one run: two `ataman serve`
# of the same build, one plain, one with `--tls-cert`/`--tls-key`
# (certificates from `ataman cert`), each filled with ids 1..10000, then
# per round: closed-loop GET of existing ids and durable PUT of random ids,
# SECONDS each, 16 keep-alive connections, 2 generator threads, plain and
# TLS in alternating order. Prints per run the rate and the node's CPU time
# per request (utime + stime from /proc at 100 Hz), then the handshake rate
# (`openssl s_time -new`, new TLS connections, no request).
#
#   bench/tls-ab.sh [BIN] [ROUNDS] [SECONDS]
set -euo pipefail

B=${1:-target/release/ataman}
ROUNDS=${2:-3}
SECONDS_EACH=${3:-5}
D=$(mktemp -d /tmp/tls-ab.XXXX)
trap 'kill $P1 $P2 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
"$B" cert create-ca --certs-dir "$D/certs" >/dev/null
"$B" cert create-node --certs-dir "$D/certs" >/dev/null
"$B" serve --listen 127.0.0.1:19901 --data-dir "$D/plain" >/dev/null 2>&1 & P1=$!
"$B" serve --listen 127.0.0.1:19902 --data-dir "$D/tls" \
  --tls-cert "$D/certs/node.crt" --tls-key "$D/certs/node.key" >/dev/null 2>&1 & P2=$!
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
pid() { if [ "$1" = plain ]; then echo $P1; else echo $P2; fi; }
url() {
  if [ "$1" = plain ]; then echo "--url http://127.0.0.1:19901"
  else echo "--url https://127.0.0.1:19902 --tls-ca $D/certs/ca.crt"; fi
}
for m in plain tls; do
  # shellcheck disable=SC2046
  "$B" bench http $(url $m) --rate 0 --fill 10000 --keys 10000 --workload get-existing \
    --duration 1s --connections 16 --threads 2 --no-spectrum >/dev/null 2>&1
done
printf 'round\tworkload\tmode\treq_per_s\tnode_cpu_us_per_req\tload\n'
for round in $(seq 1 "$ROUNDS"); do
  for wl in get-existing put-random; do
    order="plain tls"; [ $((round % 2)) = 0 ] && order="tls plain"
    for m in $order; do
      t0=$(ticks "$(pid $m)")
      # shellcheck disable=SC2046
      out=$("$B" bench http $(url $m) --rate 0 --keys 10000 --workload $wl \
        --duration "${SECONDS_EACH}s" --connections 16 --threads 2 --no-spectrum 2>/dev/null)
      t1=$(ticks "$(pid $m)")
      r=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
      n=$(echo "$out" | awk '/requests in/ {print $1}')
      cpu=$(awk -v t=$((t1 - t0)) -v n="$n" 'BEGIN {printf "%.2f", t * 10000 / n}')
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" $wl $m "$r" "$cpu" "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
echo "handshakes (openssl s_time -new, 5 s):"
openssl s_time -connect 127.0.0.1:19902 -new -time 5 -CAfile "$D/certs/ca.crt" 2>&1 | grep "connections in"
