#!/usr/bin/env bash
# bench/hotkeys-instructions.sh — instructions the hot-key sampler adds per
# request, counted by callgrind (independent of the machine's load): the
# sampler's pure modules (crates/node/src/hotkeys/{zipf,space_saving,
# sampler}.rs, tests left out) compiled with `rustc -O` into a driver that
# passes N requests through one network thread's gate and summary, as
# `net::dispatch::note_hot` does; the marginal instructions per request
# between N=200,000 and N=1,200,000, with and without the sampler, on
# Zipf (s = 0.99 over 1M keys) and on all-distinct keys (the worst case).
#
#   bench/hotkeys-instructions.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d /tmp/ataman-hotkeys-instr.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 - "$ROOT/crates/node/src/hotkeys" "$TMP/main.rs" <<'PY'
import re, sys
src, out_path = sys.argv[1:]
def strip(s):
    s = re.sub(r'\n#\[cfg\(test\)\]\nmod tests \{.*\Z', '\n', s, flags=re.S)
    s = re.sub(r'^use .*;\n', '', s, flags=re.M)
    return re.sub(r'^//!.*\n', '', s, flags=re.M)
out = ("use std::collections::HashMap;\nuse std::hash::{BuildHasherDefault, Hasher};\n"
       "use std::sync::Mutex;\n"
       "fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> { m.lock().unwrap() }\n")
for f in ("zipf.rs", "space_saving.rs", "sampler.rs"):
    out += strip(open(f"{src}/{f}").read())
out += '''
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let n: u64 = a[2].parse().unwrap();
    let mut zipf = Zipf::new(1_000_000, 0.99, 9);
    let ks: Vec<Vec<u8>> = if a[3] == "zipf" {
        (0..1 << 16).map(|_| key_of(zipf.next())).collect()
    } else {
        (0..1 << 16).map(|i| key_of(1_000_000 + i)).collect()
    };
    let hot = HotKeys::default();
    let mut gate = Gate::new(1);
    let mut sink = 0u64;
    for i in 0..n {
        let k = &ks[(i as usize) & ((1 << 16) - 1)];
        if a[1] == "with" && gate.pass() {
            hot.note(0, k, i / 100_000);
        }
        sink = sink.wrapping_add(k[k.len() - 1] as u64);
    }
    println!("{} {}", sink % 7, hot.snapshot(0).report.seen);
}
'''
open(out_path, "w").write(out)
PY
rustc -O --edition 2021 "$TMP/main.rs" -o "$TMP/driver" 2>/dev/null
refs() { valgrind --tool=callgrind --callgrind-out-file="$TMP/cg" "$TMP/driver" "$@" 2>&1 >/dev/null |
    grep -o 'refs: *[0-9,]*' | tr -dc 0-9; }
printf 'keys\twith/request\twithout/request\tsampler/request\n'
for keys in zipf distinct; do
    w=$(( ($(refs with 1200000 $keys) - $(refs with 200000 $keys)) / 1000000 ))
    o=$(( ($(refs without 1200000 $keys) - $(refs without 200000 $keys)) / 1000000 ))
    printf '%s\t%d\t%d\t%d\n' "$keys" "$w" "$o" "$((w - o))"
done
