#!/usr/bin/env bash
# HTTP framing benchmark: hand-written mio+httparse vs hyper 1.x (tokio).
#
# Builds both servers in release mode, runs wrk against 127.0.0.1 only, and prints a
# markdown table of medians over REPS repetitions. Raw numbers go to results/raw.tsv.
#
# Per configuration and repetition (server restarted each time), four wrk runs:
#   get-max / put-max : closed loop, wrk -t2 -c64 -d${MAX_SECS}s        (max throughput)
#   get-pace/put-pace : wrk -t2 -c32 -d${PACE_SECS}s, each connection waits 1 ms between
#                       requests (lua delay()): a fixed-rate-ish load well under saturation
# Server CPU = utime+stime of the server process (all threads) from /proc/PID/stat,
# read right before and after each wrk run, divided by the request count wrk reports.
#
# Also recorded: the same CPU from /proc/PID/task/*/schedstat (ns, a cross-check), wrk's own
# CPU, and the share of the machine used by neither (other users of this shared machine).
# The tx configurations (PUT only) hand every write to a stand-in transaction thread and
# get the completion back through a queue + wake-up, as the node's net thread will.
# Configurations are interleaved, order rotated each repetition. About 8 minutes.
#
# Env: REPS (3), MAX_SECS (10), PACE_SECS (4), TX (1: also run TX_CONFIGS),
# CONFIGS / TX_CONFIGS (space-separated "binary:threads[:flags]", ',' for spaces in flags;
# e.g. CONFIGS="hyper:1:--flavor,multi" TX=0 for a 1-worker multi-thread runtime).
set -euo pipefail

cd "$(dirname "$0")"
REPS=${REPS:-3}
MAX_SECS=${MAX_SECS:-10}
PACE_SECS=${PACE_SECS:-4}
TX=${TX:-1}
CONFIGS=${CONFIGS:-"mio-httparse:1 mio-httparse:2 hyper:1 hyper:2"}
TX_CONFIGS=${TX_CONFIGS:-"mio-httparse:1:--tx hyper:1:--tx hyper:1:--tx,--tx-batch"}
HZ=$(getconf CLK_TCK)
URL_PATH='/v0/entity?id=42'

command -v wrk >/dev/null || { echo "wrk not found: apt-get update && apt-get install -y wrk" >&2; exit 1; }

echo "building (release)..." >&2
cargo build --release --quiet

mkdir -p results
RAW=results/raw.tsv
LOG=results/wrk.log
: >"$LOG"
printf 'config\trep\trun\trequests\trps\tp99_ms\tcpu_ticks\tcpu_us_per_req\twrk_ticks\tother_pct\tsched_us_per_req\terrors\n' >"$RAW"

{
  echo "machine: nproc=$(nproc); $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1); $(free -g | awk '/^Mem:/{print "mem " $2 " GiB"}'); CLK_TCK=$HZ"
  echo "kernel: $(uname -r); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $(rustc --version)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee results/machine.txt >&2

ticks() { # utime+stime of a process, in clock ticks
  local s
  s=$(cat "/proc/$1/stat")
  s=${s##*) }
  # shellcheck disable=SC2086
  set -- $s
  echo $(( ${12} + ${13} ))
}

sched_ns() { # precise on-CPU time of all threads of a process, ns (cross-check of utime+stime)
  cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'
}

busy() { # machine-wide busy clock ticks (all CPUs) from /proc/stat
  awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat
}

to_ms() { # wrk latency like 1.23ms / 456.00us / 1.10s -> ms
  awk -v v="$1" 'BEGIN{ if (v ~ /us$/) printf "%.3f", v/1000; else if (v ~ /ms$/) printf "%.3f", v+0; else if (v ~ /s$/) printf "%.3f", v*1000; else print "nan" }'
}

port=18100
run_one() { # config rep
  local cfg=$1 rep=$2 bin threads flags
  IFS=: read -r bin threads flags <<<"$cfg"
  flags=${flags//,/ }
  port=$((port + 1))
  # shellcheck disable=SC2086
  "./target/release/$bin" --addr "127.0.0.1:$port" --threads "$threads" $flags 2>>"$LOG" &
  local pid=$!
  local i
  for i in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.05
  done
  local runs="get-max put-max get-pace put-pace"
  [[ $flags == *--tx* ]] && runs="put-max put-pace"
  local run
  for run in $runs; do
    local args
    case $run in
      get-max) args=(-t2 -c64 "-d${MAX_SECS}s") ;;
      put-max) args=(-t2 -c64 "-d${MAX_SECS}s" -s lua/put.lua) ;;
      get-pace) args=(-t2 -c32 "-d${PACE_SECS}s" -s lua/get-paced.lua) ;;
      put-pace) args=(-t2 -c32 "-d${PACE_SECS}s" -s lua/put-paced.lua) ;;
    esac
    local t0 t1 n0 n1 b0 b1 out wt s0 s1 sus
    t0=$(ticks "$pid")
    n0=$(sched_ns "$pid")
    b0=$(busy)
    s0=$(date +%s%N)
    # `times` in the subshell reports its children's CPU, i.e. wrk's.
    out=$(wrk "${args[@]}" --latency "http://127.0.0.1:$port$URL_PATH"; times)
    t1=$(ticks "$pid")
    n1=$(sched_ns "$pid")
    b1=$(busy)
    s1=$(date +%s%N)
    wt=$(tail -1 <<<"$out" | awk -v hz="$HZ" '{ split($1, u, /[ms]/); split($2, k, /[ms]/); printf "%d", (u[1] * 60 + u[2] + k[1] * 60 + k[2]) * hz }')
    # Share of the machine's CPUs used by neither this server nor wrk (other developers).
    local other
    other=$(awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v w="$wt" -v ns=$((s1 - s0)) -v hz="$HZ" -v n="$(nproc)" \
      'BEGIN{ o = (b - t - w) / (ns / 1e9 * hz * n) * 100; if (o < 0) o = 0; printf "%.0f", o }')
    printf '### %s rep %s %s\n%s\n' "$cfg" "$rep" "$run" "$out" >>"$LOG"
    local reqs rps p99 errs
    reqs=$(awk '/requests in/{print $1}' <<<"$out")
    rps=$(awk '/^Requests\/sec/{print $2}' <<<"$out")
    p99=$(to_ms "$(awk '$1=="99%"{print $2}' <<<"$out")")
    errs=$(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr -s ' ' | tr '\n' ';' || true)
    local us
    us=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN{printf "%.2f", t * 1e6 / hz / n}')
    sus=$(awk -v ns=$((n1 - n0)) -v n="$reqs" 'BEGIN{printf "%.2f", ns / 1000 / n}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cfg" "$rep" "$run" "$reqs" "$rps" "$p99" $((t1 - t0)) "$us" "$wt" "$other" "$sus" "${errs:--}" >>"$RAW"
    printf '  %-32s rep %s %-8s %9s rps  p99 %8s ms  %6s us/req (sched %6s)  other %3s%% %s\n' "$cfg" "$rep" "$run" "$rps" "$p99" "$us" "$sus" "$other" "${errs}" >&2
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

all_configs=($CONFIGS)
[[ $TX == 1 ]] && all_configs+=($TX_CONFIGS)
start=$(date +%s)
for rep in $(seq "$REPS"); do
  # Rotate the order each repetition so drift on the shared machine does not favour one server.
  n=${#all_configs[@]}
  for k in $(seq 0 $((n - 1))); do
    run_one "${all_configs[$(((k + rep - 1) % n))]}" "$rep"
  done
done
echo "wall time: $(($(date +%s) - start)) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a results/machine.txt >&2

python3 - "$RAW" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
cfgs = list(dict.fromkeys(r["config"] for r in rows))
def vals(cfg, run, key):
    return [float(r[key]) for r in rows if r["config"] == cfg and r["run"] == run]
def med(cfg, run, key, fmt):
    v = vals(cfg, run, key)
    if not v:
        return "–"
    m = statistics.median(v)
    spread = (max(v) - min(v)) / m * 100 if m else 0
    return f"{fmt.format(m)} (±{spread/2:.0f}%)"
def name(cfg):
    b, t, *f = cfg.split(":")
    extra = " ".join(x.replace(",", " ") for x in f)
    rt = ""
    if b == "hyper":
        rt = " current_thread" if t == "1" and "multi" not in extra else " multi_thread"
    return f"{b}{' ' + extra if extra else ''}", t + rt
print("| server | threads | GET rps | PUT rps | CPU µs/req GET (paced / max) | CPU µs/req PUT (paced / max) | p99 ms GET max / PUT max | p99 ms GET / PUT paced | other load |")
print("|---|---|---|---|---|---|---|---|---|")
for c in cfgs:
    s, t = name(c)
    def m(run, key, fmt="{:.0f}"):
        v = vals(c, run, key)
        return fmt.format(statistics.median(v)) if v else "–"
    print(f"| {s} | {t} | {med(c,'get-max','rps','{:.0f}')} | {med(c,'put-max','rps','{:.0f}')} "
          f"| {med(c,'get-pace','cpu_us_per_req','{:.2f}')} / {m('get-max','cpu_us_per_req','{:.2f}')} "
          f"| {med(c,'put-pace','cpu_us_per_req','{:.2f}')} / {m('put-max','cpu_us_per_req','{:.2f}')} "
          f"| {m('get-max','p99_ms','{:.2f}')} / {m('put-max','p99_ms','{:.2f}')} "
          f"| {m('get-pace','p99_ms','{:.2f}')} / {m('put-pace','p99_ms','{:.2f}')} "
          f"| {statistics.median(float(r['other_pct']) for r in rows if r['config'] == c):.0f}% |")
print()
print(f"Medians of {max(int(r['rep']) for r in rows)} runs; (±x%) is half the min–max range over the median. "
      "'other load': median share of both cores used by neither the server nor wrk during its runs.")
print("Paced rps (the request rate at which paced CPU was measured):",
      "; ".join(f"{c}: GET {m} / PUT {p}" for c in cfgs
                for m, p in [(f"{statistics.median(vals(c,'get-pace','rps')):.0f}" if vals(c,'get-pace','rps') else '–',
                              f"{statistics.median(vals(c,'put-pace','rps')):.0f}" if vals(c,'put-pace','rps') else '–')]))
print("Cross-check, server CPU µs/req from /proc/PID/task/*/schedstat (ns on CPU), median paced GET / PUT, max GET / PUT:")
for c in cfgs:
    m = lambda run: (f"{statistics.median(vals(c, run, 'sched_us_per_req')):.2f}" if vals(c, run, 'sched_us_per_req') else "–")
    print(f"  {c}: {m('get-pace')} / {m('put-pace')}, {m('get-max')} / {m('put-max')}")
oth = [float(r["other_pct"]) for r in rows]
print(f"CPU used by other processes on the shared machine during the runs: median {statistics.median(oth):.0f}%, max {max(oth):.0f}% of both cores.")
errs = [r for r in rows if r["errors"] != "-"]
if errs:
    print("wrk reported errors:", "; ".join(f"{r['config']} {r['rep']} {r['run']}: {r['errors']}" for r in errs))
EOF
