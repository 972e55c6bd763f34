#!/bin/bash
# Backup and restore figures (issue 33; docs/BENCHMARKS.md, "Backup and
# restore"; docs/BACKUP.md): a local 3-node cluster (R = 3) filled with N
# keys (default 400000) of 1-4 KiB (uniform; ~1 GB of values on each
# node), written ack=2 of from=3, then:
# 1. checkpoint: `POST /v0/backup` on each node, CKPT_RUNS times each
#    (default 3): the time from the request to the checkpoint's answer
#    (the answer comes once it is complete: links, the memtables' table,
#    checksums), and `cat` of the same files to /dev/null (one read of the
#    bytes the checksums read); each deleted after;
# 2. foreground p99 during a cluster backup: a constant-rate load
#    (`ataman bench http`, mixed:50, LOAD_RATE req/s, default 2000) for
#    BEFORE_SEC (default 30) seconds alone, then `ataman backup create`
#    through node 0 while it runs DURING_SEC (default 120) seconds more;
#    the per-second p99 of the seconds before it against those while it
#    ran (median and worst of the seconds);
# 3. same-layout restore (offline, node 0's checkpoint): `ataman backup
#    restore DIR --data-dir PATH --node 0` (tables hard-linked), with
#    `--copy`, and `cp -r` of the same member directory on the same disk
#    (alone, and with its files fsynced after, as the restore fsyncs),
#    RESTORE_RUNS times each (default 3), each into a fresh directory,
#    medians; the page cache is warm for all three (the backup was just
#    written; nothing is dropped: the machine is shared);
# 4. restore onto 5 nodes (the ingest path): `ataman backup restore DIR
#    --url` into a fresh 5-node cluster: keys (and versions) per second;
#    then the ingest ceiling: closed-loop PUTs of 1-4 KiB on the same
#    cluster (`ataman bench http --rate 0`, 64 connections, 20 s).
# PHASES (default "checkpoint p99 restore grow") picks the parts to run.
# BACKUP_TO (default BENCH_DIR/bk) is where the cluster backup is written:
# /dev/shm/… keeps its 3 GB of writes off the nodes' disk (their WALs
# fsync every write).
# ATAMAN (default target/release/ataman) is the binary; SERVE_ARGS extra
# `ataman serve` words for every node (e.g. "--backup-rate-bytes 67108864").
# Usage: bench/backup.sh [N], from the repository root after
# `cargo build --release -p ataman`. Loopback ports BASE_PORT (44100)
# .. +2 and + RESP_OFFSET (1000) .. +2 (the 3 nodes), BASE_PORT + 100 ..
# +104 and + RESP_OFFSET + 100 .. +104 (the 5 nodes). BENCH_DIR (default
# /tmp/ataman-backup-bench) holds everything and is removed at the end
# unless KEEP=1. Needs about 12 x the data of one node free on its disk.
set -eu
B=${ATAMAN:-target/release/ataman}
N=${1:-400000}
BASE=${BASE_PORT:-44100}
BASE5=$((BASE + 100))
LOAD_RATE=${LOAD_RATE:-2000}
BEFORE_SEC=${BEFORE_SEC:-30}
DURING_SEC=${DURING_SEC:-120}
CKPT_RUNS=${CKPT_RUNS:-3}
RESTORE_RUNS=${RESTORE_RUNS:-3}
RESP_OFFSET=${RESP_OFFSET:-1000}
PHASES=" ${PHASES:-checkpoint p99 restore grow} "
run() { [[ "$PHASES" == *" $1 "* ]]; }
R=${BENCH_DIR:-/tmp/ataman-backup-bench}; rm -rf "$R"; mkdir -p "$R"
BK=${BACKUP_TO:-$R/bk}
U0="http://127.0.0.1:$BASE"
U="$U0,http://127.0.0.1:$((BASE + 1)),http://127.0.0.1:$((BASE + 2))"
U5="http://127.0.0.1:$BASE5"
SUP= SUP5= LOAD=
cleanup() {
  kill $LOAD $SUP $SUP5 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$R" "$BK"
}
trap cleanup EXIT
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.3f}')"; }
median() { python3 -c "import statistics,sys; print(f'{statistics.median(float(x) for x in sys.argv[1:]):.3f}')" "$@"; }
start_cluster() { # NODES BASE_PORT DIR; sets STARTED to the supervisor's pid
  # shellcheck disable=SC2086 # SERVE_ARGS: extra `ataman serve` words
  $B cluster start --nodes "$1" --base-port "$2" --resp-base-port "$(($2 + RESP_OFFSET))" --dir "$3" \
    ${SERVE_ARGS:+-- $SERVE_ARGS} > "$3.out" 2> "$3.err" &
  STARTED=$!
  for _ in $(seq 600); do [ "$(wc -l < "$3.out")" -ge "$1" ] && break; sleep 0.1; done
  [ "$(wc -l < "$3.out")" -ge "$1" ] || { echo "the cluster did not start"; cat "$3.err"; exit 1; }
}

echo "== machine: $(nproc) vCPUs, $(awk '/MemTotal/ {print int($2/1048576)}' /proc/meminfo) GiB, load $(cut -d' ' -f1-3 /proc/loadavg); $(df -h "$R" | awk 'NR == 2 {print $4 " free on " $1}')"
start_cluster 3 "$BASE" "$R/c3"; SUP=$STARTED
t=$(now)
$B bench http --url "$U" --workload get-existing --fill "$N" --value-size 1024-4096 --ack 2 --from 3 \
  --rate 10 --duration 1s --connections 48 --no-spectrum > "$R/fill.txt" 2>&1
echo "== filled $N keys of 1-4 KiB in $(secs "$t" "$(now)") s; node 0's data directory: $(du -sh "$R/c3/node-0" | cut -f1)"

# 1. Checkpoints.
times=() reads=()
for k in $(seq "$CKPT_RUNS"); do
  run checkpoint || break
  for i in 0 1 2; do
    url="http://127.0.0.1:$((BASE + i))"
    t=$(now)
    curl -sf -X POST "$url/v0/backup" > "$R/ckpt.json"
    d=$(secs "$t" "$(now)")
    times+=("$d")
    read -r name files bytes pinned path < <(python3 -c "import json; j = json.load(open('$R/ckpt.json')); print(j['name'], j['files'], j['bytes'], j['pinned_bytes'], j['path'])")
    parts=$(curl -sf "$url/metrics" | awk '/^ataman_backup_checkpoint_links_microseconds / {l = $2} /^ataman_backup_checkpoint_checksums_microseconds / {c = $2} END {if (l != "") printf "links %.3f s, checksums %.3f s", l / 1e6, c / 1e6; else printf "parts not timed (an older node)"}')
    t=$(now); find "$path" -type f -exec cat {} + > /dev/null; reads+=("$(secs "$t" "$(now)")")
    echo "   checkpoint run $k node $i: $d s ($files files, $bytes bytes, $pinned pinned by links; $parts); cat of its files ${reads[-1]} s"
    curl -sf -X DELETE "$url/v0/backup?name=$name" > /dev/null
  done
done
run checkpoint && echo "== checkpoint, request to complete: median $(median "${times[@]}") s of ${#times[@]} (max $(printf '%s\n' "${times[@]}" | sort -g | tail -1) s); cat of the same files: median $(median "${reads[@]}") s"

# 2. Foreground p99 before and during a cluster backup (the backup is
# taken in any case: the restores read it).
if run p99; then
  $B bench http --url "$U" --workload mixed:50 --keys "$N" --value-size 1024-4096 --rate "$LOAD_RATE" \
    --duration "$((BEFORE_SEC + DURING_SEC))s" --connections 32 --json "$R/load.json" --no-spectrum > "$R/load.txt" 2>&1 &
  LOAD=$!
  T0=$(now)
  sleep "$BEFORE_SEC"
fi
TB=$(now)
$B backup create --url "$U0" --to "$BK" > "$R/create.txt" 2>&1
TE=$(now)
echo "== cluster backup: $(secs "$TB" "$TE") s, $(du -sh "$BK" | cut -f1) written"
if run p99; then
  wait $LOAD || true
  LOAD=
  [ "$(python3 -c "print(int($TE - $T0 < $BEFORE_SEC + $DURING_SEC))")" = 1 ] || echo "!! the backup outlasted the load: raise DURING_SEC"
fi
run p99 && python3 - "$R/load.json" "$T0" "$TB" "$TE" <<'PY'
import json, statistics, sys
path, t0, tb, te = sys.argv[1], *map(float, sys.argv[2:])
try:
    report = json.load(open(path))
except (OSError, ValueError):
    sys.exit(f"no load report in {path} (the load ended early?)")
series = report["series"]
def phase(a, b):
    s = [x for x in series if a <= x["second"] < b]
    p99 = [x["p99_ms"] for x in s]
    bad = sum(x["non_2xx"] + x["errors"] for x in s)
    rate = sum(x["requests"] for x in s) / max(len(s), 1)
    return len(s), rate, statistics.median(p99), max(p99), bad
before = phase(2, int(tb - t0))
during = phase(int(tb - t0), int(te - t0) + 1)
for name, (n, rate, med, worst, bad) in (("before", before), ("during", during)):
    print(f"   {name}: {n} s at {rate:.0f} req/s, per-second p99 median {med:.2f} ms, worst {worst:.2f} ms, non-2xx+errors {bad}")
print(f"== foreground p99 during the backup / before: {during[2] / before[2]:.2f}x (median of the seconds; worst {during[3] / before[3]:.2f}x)")
PY

# 3. Same-layout restore, offline, against cp -r.
link=() copy=() cpr=() cps=()
for k in $(seq "$RESTORE_RUNS"); do
  run restore || break
  t=$(now); $B backup restore "$BK" --data-dir "$R/rl$k" --node 0 > "$R/rl$k.txt"; link+=("$(secs "$t" "$(now)")")
  t=$(now); $B backup restore "$BK" --data-dir "$R/rc$k" --node 0 --copy > "$R/rc$k.txt"; copy+=("$(secs "$t" "$(now)")")
  t=$(now); cp -r "$BK/node-0" "$R/cp$k"; cpr+=("$(secs "$t" "$(now)")")
  find "$R/cp$k" -type f -exec sync {} +; cps+=("$(secs "$t" "$(now)")")
  echo "   run $k: linked ${link[-1]} s, --copy ${copy[-1]} s, cp -r ${cpr[-1]} s (${cps[-1]} s with its files fsynced, as the restore does)"
  rm -rf "$R/rl$k" "$R/rc$k" "$R/cp$k"
done
if run restore; then
ML=$(median "${link[@]}") MC=$(median "${copy[@]}") MP=$(median "${cpr[@]}") MS=$(median "${cps[@]}")
pct() { python3 -c "print(f'{$1 / $2 * 100:.0f}')"; }
echo "== same-layout restore of $(du -sh "$BK/node-0" | cut -f1) (node 0), medians: linked $ML s, --copy $MC s; cp -r $MP s, cp -r + fsync $MS s"
echo "== speed against cp -r + fsync: linked $(pct "$MS" "$ML")%, --copy $(pct "$MS" "$MC")%; against cp -r alone: linked $(pct "$MP" "$ML")%, --copy $(pct "$MP" "$MC")%"
fi
kill $SUP; wait $SUP 2>/dev/null || true; SUP=
rm -rf "$R/c3"

# 4. Restore onto 5 nodes through the ingest path, and the ingest ceiling.
run grow || exit 0
start_cluster 5 "$BASE5" "$R/c5"; SUP5=$STARTED
t=$(now)
$B backup restore "$BK" --url "$U5" --timeout-ms 600000 > "$R/restore5.txt" 2>&1
d=$(secs "$t" "$(now)")
cat "$R/restore5.txt"
python3 -c "
import re
text = open('$R/restore5.txt').read()
read = int(re.search(r'(\d+) versions read', text).group(1))
print(f'== restore 3 -> 5 nodes: {$d:.1f} s, {$N / $d:.0f} keys/s ({read / $d:.0f} versions read/s, each key from each of the 3 checkpoints)')"
U5ALL=$(for i in 0 1 2 3 4; do echo "http://127.0.0.1:$((BASE5 + i))"; done | paste -sd,)
$B bench http --url "$U5ALL" --workload put-random --keys "$N" --value-size 1024-4096 --rate 0 \
  --duration 20s --connections 64 --json "$R/ceiling.json" --no-spectrum > "$R/ceiling.txt" 2>&1
python3 -c "
import json
j = json.load(open('$R/ceiling.json'))
print(f\"== ingest ceiling, plain PUTs of 1-4 KiB on the same 5 nodes (closed loop, 64 connections, 20 s): {j['achieved_rps']:.0f} keys/s; the restore reached {$N / $d / j['achieved_rps'] * 100:.0f}% of it\")"
