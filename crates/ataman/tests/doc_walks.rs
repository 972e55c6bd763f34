//! The walkthroughs of docs/CLUSTER.md and docs/SECURITY.md run as
//! written, against the built binary, and print what the documents say.
//!
//! A walk is a fenced block whose info string is `sh walk` or `text walk`
//! (renderers show them as `sh` and `text`); every walk of a document runs,
//! in order, in one `bash` (`set -euo pipefail`) in a fresh directory, with
//! the built `ataman` first on `PATH`. A step is:
//! - in an `sh walk`: a run of command lines (a loop or a `\` continuation
//!   included), ended by a blank line or a comment; the `# ` lines right
//!   after it are what it prints;
//! - in a `text walk` (a terminal transcript): one `$ ` line, and the lines
//!   up to the next `$ ` what it prints.
//!
//! Each step's stdout goes to its own file (a process it starts in the
//! background writes there too, not into a later step's output); a step
//! that fails stops the walk, which fails the test with the outputs so far.
//! Ports: the document's ports share a four-digit prefix per node group
//! (`1943` for `19431`…`19434`, also written `1943$i`); the test replaces
//! each prefix in the commands with one whose ports are free here.
//!
//! What a step prints is compared line by line after every run of digits
//! is read as one number (so ports, pids, counts and versions may differ)
//! and `…` in the document matches anything. Repeated lines count once,
//! and the document may show lines the run does not print (a progress line
//! that a fast run skips), but every printed line must be shown, in order,
//! and the first and last printed lines must be the document's first and
//! last. Everything runs on 127.0.0.1, bounded by [`WALK_TIME_MAX`]; the
//! walk's processes are one process group, ended when the walk ends.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Bound on one document's whole walk; each takes well under a minute.
const WALK_TIME_MAX: Duration = Duration::from_secs(150);
/// Time between two looks at the walk's shell.
const WALK_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Bound on the walk's processes exiting after SIGTERM, before SIGKILL.
const STOP_WAIT_MAX: Duration = Duration::from_secs(20);
/// Lines of each node log shown when a walk fails.
const LOG_LINES_SHOWN: usize = 15;
/// Tries at finding a free group of ports.
const PORT_TRIES_MAX: u32 = 200;

/// One step of a walk: commands and what the document says they print.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    /// 1-based line of the document where the step starts.
    line: usize,
    /// The shell text, as in the document.
    commands: String,
    /// The lines the document shows it printing (empty: not checked).
    prints: Vec<String>,
}

/// The kind of a walk block.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Sh,
    Transcript,
}

/// The steps of every walk block of `markdown`, in order.
fn steps(markdown: &str) -> Vec<Step> {
    let mut found = Vec::new();
    let mut block: Option<Block> = None;
    let mut open: Option<Step> = None;
    let mut in_prints = false;
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        let fence = line.trim_start();
        if fence.starts_with("```") {
            found.extend(open.take());
            // A walk's fence opens it, any other fence closes what is open
            // (the lines of a block that is not a walk are skipped).
            block = match (block, fence.trim_end()) {
                (None, "```sh walk") => Some(Block::Sh),
                (None, "```text walk") => Some(Block::Transcript),
                _ => None,
            };
            in_prints = false;
            continue;
        }
        let Some(kind) = block else { continue };
        match kind {
            Block::Sh => sh_line(line, number, &mut open, &mut in_prints, &mut found),
            Block::Transcript => transcript_line(line, number, &mut open, &mut found),
        }
    }
    found.extend(open);
    found
}

/// One line of an `sh walk` block.
fn sh_line(
    line: &str,
    number: usize,
    open: &mut Option<Step>,
    in_prints: &mut bool,
    found: &mut Vec<Step>,
) {
    if line.trim().is_empty() {
        found.extend(open.take());
        *in_prints = false;
    } else if let Some(comment) = line.trim_start().strip_prefix('#') {
        match open {
            Some(step) if *in_prints || !step.commands.is_empty() => {
                step.prints
                    .push(comment.strip_prefix(' ').unwrap_or(comment).to_string());
                *in_prints = true;
            }
            _ => {}
        }
    } else {
        if *in_prints {
            found.extend(open.take());
            *in_prints = false;
        }
        let step = open.get_or_insert_with(|| Step {
            line: number,
            commands: String::new(),
            prints: Vec::new(),
        });
        step.commands.push_str(line);
        step.commands.push('\n');
    }
}

/// One line of a `text walk` block.
fn transcript_line(line: &str, number: usize, open: &mut Option<Step>, found: &mut Vec<Step>) {
    if let Some(command) = line.strip_prefix("$ ") {
        found.extend(open.take());
        *open = Some(Step {
            line: number,
            commands: format!("{command}\n"),
            prints: Vec::new(),
        });
    } else if let Some(step) = open {
        let continued = step.prints.is_empty() && step.commands.trim_end().ends_with('\\');
        if continued {
            step.commands.push_str(line);
            step.commands.push('\n');
        } else if !line.trim().is_empty() {
            step.prints.push(line.to_string());
        }
    }
}

/// A line with every run of digits read as `0`.
fn digits_as_one(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_number = false;
    for c in line.trim_end().chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('0');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

/// Whether `line` matches the document's `pattern` (`…` matches anything).
fn matches(pattern: &str, line: &str) -> bool {
    let (pattern, line) = (digits_as_one(pattern), digits_as_one(line));
    let pieces: Vec<&str> = pattern.split('…').collect();
    let Some((first, rest)) = pieces.split_first() else {
        return line.is_empty();
    };
    let Some(mut left) = line.strip_prefix(first) else {
        return false;
    };
    for (i, piece) in rest.iter().enumerate() {
        if i + 1 == rest.len() {
            return left.ends_with(piece);
        }
        match left.find(piece) {
            Some(at) => left = &left[at + piece.len()..],
            None => return false,
        }
    }
    left.is_empty()
}

/// Lines with repeats in a row kept once (after [`digits_as_one`]).
fn collapsed(lines: &[String]) -> Vec<&String> {
    let mut out: Vec<&String> = Vec::new();
    for line in lines {
        if out
            .last()
            .is_none_or(|last| digits_as_one(last) != digits_as_one(line))
        {
            out.push(line);
        }
    }
    out
}

/// Why `printed` is not what the document shows (`None`: it is).
fn mismatch(shown: &[String], printed: &[String]) -> Option<String> {
    let (shown, printed) = (collapsed(shown), collapsed(printed));
    let (Some(first), Some(last)) = (printed.first(), printed.last()) else {
        return Some("it printed nothing".into());
    };
    if !matches(shown[0], first) {
        return Some(format!(
            "first line {first:?}, the document shows {:?}",
            shown[0]
        ));
    }
    if !matches(shown[shown.len() - 1], last) {
        return Some(format!(
            "last line {last:?}, the document shows {:?}",
            shown[shown.len() - 1]
        ));
    }
    let mut at = 0;
    for line in printed {
        match shown[at..].iter().position(|p| matches(p, line)) {
            Some(i) => at += i,
            None => return Some(format!("{line:?} is not shown (in this order)")),
        }
    }
    None
}

/// The bash script of a walk: each step's output to `out-N`, its number
/// to `at` before it runs.
fn script(steps: &[Step], ports: &[(&str, String)]) -> String {
    let mut text = String::from("set -euo pipefail\n");
    for (i, step) in steps.iter().enumerate() {
        let mut commands = step.commands.clone();
        for (from, to) in ports {
            commands = commands.replace(from, to);
        }
        text.push_str(&format!(
            "echo {i} > at\n{{\n{commands}\n}} > out-{i} 2> err-{i}\n"
        ));
    }
    text.push_str("echo done > at\n");
    text
}

/// A four-digit prefix `k` whose ports `k1`…`k4` are free, with those of
/// each `k + offset` of `offsets`.
fn free_prefixes(offsets: &[u32], salt: u32) -> Vec<String> {
    // The walks of one test binary run at once: each starts elsewhere (a
    // port bound here is released before the walk binds it again).
    let start = (std::process::id() % 2000) + salt * 1009;
    for t in 0..PORT_TRIES_MAX {
        let k = 3000 + (start + t * 7) % 2500;
        let bound: Option<Vec<TcpListener>> = offsets
            .iter()
            .flat_map(|o| (1..=4).map(move |i| (k + o) * 10 + i))
            .map(|port| TcpListener::bind(("127.0.0.1", port as u16)).ok())
            .collect();
        if bound.is_some() {
            return offsets.iter().map(|o| (k + o).to_string()).collect();
        }
    }
    panic!("no free group of ports found in {PORT_TRIES_MAX} tries");
}

/// A directory holding `ataman` (the built binary), for `PATH`.
fn bin_dir(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_ataman"), bin.join("ataman")).unwrap();
    bin
}

/// Sends `signal` to the walk's process group.
fn signal_group(child: &Child, signal: libc::c_int) {
    let group = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a negative pid signals the process group the
    // walk's shell leads (it was started with process_group(0)); it reads
    // no memory of ours.
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Ends every process of the walk: SIGTERM, then SIGKILL after
/// [`STOP_WAIT_MAX`] (the group may outlive its shell).
fn stop_group(child: &mut Child) {
    signal_group(child, libc::SIGTERM);
    let started = Instant::now();
    while started.elapsed() < STOP_WAIT_MAX {
        let group = libc::pid_t::try_from(child.id()).unwrap();
        // SAFETY: signal 0 only checks whether the group still exists.
        if unsafe { libc::kill(-group, 0) } != 0 {
            break;
        }
        std::thread::sleep(WALK_POLL_INTERVAL);
    }
    signal_group(child, libc::SIGKILL);
    let _ = child.wait();
}

/// Runs the walk of `doc` with the document's port prefixes `doc_ports`
/// (each with its offset from the first), and checks every step.
fn walk(doc: &str, doc_ports: &[(&'static str, u32)]) {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs")
            .join(doc),
    )
    .unwrap();
    let steps = steps(&text);
    assert!(
        steps.iter().filter(|s| !s.prints.is_empty()).count() >= 3,
        "{doc}: fewer than three checked steps found: {steps:#?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let bin = bin_dir(dir.path());
    let work = dir.path().join("walk");
    std::fs::create_dir_all(&work).unwrap();
    let salt = u32::from(doc.as_bytes()[0]);
    let free = free_prefixes(&doc_ports.iter().map(|(_, o)| *o).collect::<Vec<_>>(), salt);
    let ports: Vec<(&str, String)> = doc_ports.iter().map(|(p, _)| *p).zip(free).collect();
    std::fs::write(work.join("walk.sh"), script(&steps, &ports)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("bash")
        .arg("walk.sh")
        .current_dir(&work)
        .env("PATH", path)
        .env_remove("ATAMAN_URL")
        .env_remove("ATAMAN_TOKEN")
        .env_remove("ATAMAN_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("the walks run in bash, which could not start ({e})"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > WALK_TIME_MAX {
            break None;
        }
        std::thread::sleep(WALK_POLL_INTERVAL);
    };
    stop_group(&mut child);
    let at = std::fs::read_to_string(work.join("at")).unwrap_or_default();
    let read = |name: String| std::fs::read_to_string(work.join(name)).unwrap_or_default();
    let report = |i: usize| {
        format!(
            "{doc} line {}:\n{}--- stdout:\n{}--- stderr:\n{}",
            steps[i].line,
            steps[i].commands,
            read(format!("out-{i}")),
            read(format!("err-{i}"))
        )
    };
    if at.trim() != "done" || status.is_none_or(|s| !s.success()) {
        let failed = at.trim().parse::<usize>().map(report).unwrap_or_default();
        panic!(
            "{doc}: the walk did not finish ({:?} after {:?}); the step that failed:\n{failed}\n{}",
            status,
            started.elapsed(),
            logs(&work)
        );
    }
    for (i, step) in steps.iter().enumerate() {
        if step.prints.is_empty() {
            continue;
        }
        let printed: Vec<String> = read(format!("out-{i}"))
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        if let Some(why) = mismatch(&step.prints, &printed) {
            panic!("{}\nnot what the document shows: {why}", report(i));
        }
    }
    eprintln!("{doc}: {} steps in {:?}", steps.len(), started.elapsed());
}

/// The last lines of every `*.log` the walk wrote (its nodes' logs).
fn logs(work: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(work) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(LOG_LINES_SHOWN)..].join("\n");
            out.push_str(&format!("--- {}:\n{tail}\n", path.display()));
        }
    }
    out
}

/// docs/CLUSTER.md's walk: a 3-node `cluster start`, a load, the plan, a
/// fourth node added and removed again, each printing what the document
/// shows.
#[test]
fn cluster_md_walk_runs_as_written() {
    walk("CLUSTER.md", &[("1990", 0), ("2090", 100)]);
}

/// docs/SECURITY.md's walk: a TLS cluster with tokens and a secret, a
/// fourth node joining it, each command printing what the document shows.
#[test]
fn security_md_walk_runs_as_written() {
    walk("SECURITY.md", &[("1943", 0)]);
}

/// The extractor reads both kinds of walk block, steps and their outputs,
/// and skips every other block.
#[test]
fn extractor_reads_walk_blocks_only() {
    let doc = "text\n```sh\nnot a walk\n```\n```sh walk\na=1 \\\n  b\n# out 1\n\n# prose\nc\nd\n# out 2\n# out 3\ne\n```\n```text walk\n$ f \\\n  g\nline 1\n$ h\n```\n";
    let got = steps(doc);
    let want = [
        ("a=1 \\\n  b\n", vec!["out 1"]),
        ("c\nd\n", vec!["out 2", "out 3"]),
        ("e\n", vec![]),
        ("f \\\n  g\n", vec!["line 1"]),
        ("h\n", vec![]),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (step, (commands, prints)) in got.iter().zip(want) {
        assert_eq!(step.commands, commands, "{got:#?}");
        assert_eq!(step.prints, prints, "{got:#?}");
    }
    assert_eq!(got[0].line, 6);
}

/// The comparison reads numbers as numbers and `…` as anything, lets the
/// document show lines a run skips, and catches a line it does not show,
/// a changed first or last line, and an empty output.
#[test]
fn comparison_catches_what_differs() {
    let lines = |s: &str| s.lines().map(str::to_string).collect::<Vec<_>>();
    let shown = lines("start 19901\nmoving 0/0\nmoving 5/10\nsettled 10/10\n{\"a\":[…],\"b\":1}");
    assert_eq!(
        mismatch(
            &shown,
            &lines("start 30001\nmoving 1/2\nsettled 2/2\n{\"a\":[\"x\",\"y\"],\"b\":7}")
        ),
        None
    );
    assert!(
        mismatch(
            &shown,
            &lines("start 1\nsomething else\n{\"a\":[],\"b\":1}")
        )
        .is_some()
    );
    assert!(mismatch(&shown, &lines("begin 1\n{\"a\":[],\"b\":1}")).is_some());
    assert!(mismatch(&shown, &lines("start 1\nsettled 1/1")).is_some());
    assert!(mismatch(&shown, &[]).is_some());
    assert!(matches("va", "va") && !matches("vc", "va"));
}
