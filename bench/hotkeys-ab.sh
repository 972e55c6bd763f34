#!/usr/bin/env bash
# bench/hotkeys-ab.sh — the hot-key sampler's cost: two ataman binaries,
# A without the sampler (a build of the commit before it) and B with it,
# under the same redis-benchmark run as bench/slowlog-ab.sh (SETs, then
# GETs over a million random keys: the sampler's worst case, nearly every
# sampled key new to its summary, replacing its least counter), the two
# alternated round by round.
#
#   bench/hotkeys-ab.sh BIN_A BIN_B [ROUNDS]
#
# Build both with `cargo build --release -p ataman` (A at the parent of
# the sampler's commit). Per round, for each binary in a rotating order:
# a fresh node on an empty directory, then
#   redis-benchmark -t set,get -n $N -r 1000000 -d 100 -c 50 -P $P
# Prints one TSV line per run, then the median GET and SET rate of each
# binary and B/A.
set -euo pipefail

BIN_A=$1
BIN_B=$2
ROUNDS=${3:-3}
N=${N:-300000}
P=${P:-16}
TMP_PREFIX=ataman-hotkeys-ab
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
echo "# nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"

run_one() { # round label binary
    local port http dir=$TMP/data-$2
    port=$(free_port)
    http=$(free_port)
    rm -rf "$dir"
    "$3" serve --listen "127.0.0.1:$http" --resp-listen "127.0.0.1:$port" \
        --data-dir "$dir" >"$TMP/node.out" 2>"$TMP/node.err" &
    local pid=$!
    PIDS+=("$pid")
    wait_port "$port"
    redis-benchmark -p "$port" -t set,get -n "$N" -r 1000000 -d 100 -c 50 -P "$P" --csv \
        >"$TMP/run.csv" 2>"$TMP/run.err"
    stop_pid "$pid"
    python3 - "$TMP/run.csv" "$1" "$2" <<'PY'
import csv, sys
path, round_, label = sys.argv[1:]
for row in csv.reader(open(path)):
    if row and row[0] in ("SET", "GET"):
        print(f"{round_}\t{label}\t{row[0]}\t{float(row[1]):.0f}")
PY
}

printf 'round\tbinary\ttest\trps\n'
for round in $(seq 1 "$ROUNDS"); do
    if ((round % 2)); then order="A B"; else order="B A"; fi
    for label in $order; do
        if [ "$label" = A ]; then bin=$BIN_A; else bin=$BIN_B; fi
        run_one "$round" "$label" "$bin"
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
print("\ntest\tA median\tB median\tB/A")
for t in ("SET", "GET"):
    a = statistics.median(runs.get(("A", t), [0]))
    b = statistics.median(runs.get(("B", t), [0]))
    print(f"{t}\t{a:.0f}\t{b:.0f}\t{b / (a or 1):.3f}")
PY
