#!/usr/bin/env bash
# bench/slowlog-ab.sh — the slow log's cost: one ataman binary under the
# same redis-benchmark run as bench/resp-get-ab.sh (a SET fill, then
# GETs), with the slow log off (-1), at its default threshold (10000 µs)
# and recording every command (0), the three alternated round by round.
#
#   bench/slowlog-ab.sh BIN [ROUNDS]
#
# Per round, for each setting in a rotating order: a fresh node on an
# empty directory, `CONFIG SET slowlog-log-slower-than T`, then
#   redis-benchmark -t set,get -n $N -r 1000000 -d 100 -c 50 -P $P
# Prints one TSV line per run, then the median GET and SET rate of each
# setting and its ratio to "off".
set -euo pipefail

BIN=$1
ROUNDS=${2:-3}
N=${N:-300000}
P=${P:-16}
TMP_PREFIX=ataman-slowlog-ab
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
echo "# nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"

run_one() { # round label threshold
    local port http dir=$TMP/data-$2
    port=$(free_port)
    http=$(free_port)
    rm -rf "$dir"
    "$BIN" serve --listen "127.0.0.1:$http" --resp-listen "127.0.0.1:$port" \
        --data-dir "$dir" >"$TMP/node.out" 2>"$TMP/node.err" &
    local pid=$!
    PIDS+=("$pid")
    wait_port "$port"
    redis-cli -p "$port" config set slowlog-log-slower-than "$3" >/dev/null
    redis-benchmark -p "$port" -t set,get -n "$N" -r 1000000 -d 100 -c 50 -P "$P" --csv \
        >"$TMP/run.csv" 2>"$TMP/run.err"
    local len
    len=$(redis-cli -p "$port" slowlog len)
    stop_pid "$pid"
    python3 - "$TMP/run.csv" "$1" "$2" "$len" <<'PY'
import csv, sys
path, round_, label, len_ = sys.argv[1:]
for row in csv.reader(open(path)):
    if row and row[0] in ("SET", "GET"):
        print(f"{round_}\t{label}\t{row[0]}\t{float(row[1]):.0f}\t{len_}")
PY
}

printf 'round\tsetting\ttest\trps\tslowlog_len\n'
for round in $(seq 1 "$ROUNDS"); do
    case $((round % 3)) in
        1) order="off default all" ;;
        2) order="default all off" ;;
        *) order="all off default" ;;
    esac
    for label in $order; do
        case $label in
            off) t=-1 ;;
            default) t=10000 ;;
            all) t=0 ;;
        esac
        run_one "$round" "$label" "$t"
    done
done | tee "$TMP/all.tsv"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$TMP/all.tsv" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if f[0] == "round":
        continue
    runs.setdefault((f[1], f[2]), []).append(float(f[3]))
print("\ntest\toff median\tdefault median\tall median\tdefault/off\tall/off")
for t in ("SET", "GET"):
    m = {s: statistics.median(runs.get((s, t), [0])) for s in ("off", "default", "all")}
    off = m["off"] or 1
    print(f"{t}\t{m['off']:.0f}\t{m['default']:.0f}\t{m['all']:.0f}\t"
          f"{m['default'] / off:.3f}\t{m['all'] / off:.3f}")
PY
