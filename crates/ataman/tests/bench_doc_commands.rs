//! Every `ataman` command quoted in docs/BENCHMARKS.md and docs/BENCH.md
//! still parses with the binary's current flags.
//!
//! Each quoted command runs as `ataman ARGS --help`. clap parses the
//! arguments in order, so an unknown flag, a flag given twice or a value its
//! parser refuses (`--duration 10q`, `--durability maybe`) fails before it
//! reaches `--help`; once it does, clap prints the help and exits 0 without
//! running anything. What `--help` does not check: required arguments and
//! conflicts between flags (help wins over both). No server is started and
//! no benchmark runs.
//!
//! A command is quoted either on a line of a fenced code block (a trailing
//! `\` continues it on the next line) or in an inline code span. Its first
//! word must be the binary (`ataman`, `target/release/ataman`, any path
//! ending in `/ataman`), or `cargo run ... --` of the default binary, or a
//! wrapper such as `valgrind` or `taskset` followed by the binary; scripts
//! (`bench/peers --quick`), other programs and prose are skipped. An
//! ellipsis (`…`, `...`) ends the checked part of a command.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The documents whose commands are checked.
const DOCS: [&str; 2] = ["BENCHMARKS.md", "BENCH.md"];

/// Fewest commands each document must yield: a broken extractor that finds
/// nothing must not pass.
const COMMANDS_PER_DOC_MIN: usize = 5;

/// Programs that run the binary given later on their command line.
const WRAPPERS: [&str; 9] = [
    "valgrind",
    "perf",
    "strace",
    "taskset",
    "time",
    "/usr/bin/time",
    "nice",
    "timeout",
    "env",
];

/// How long one `--help` may take before the check gives up on it (it
/// should take milliseconds; this bound only stops a command that runs).
const HELP_WAIT_MAX: Duration = Duration::from_secs(30);
const HELP_POLL_INTERVAL: Duration = Duration::from_millis(5);

/// One command quoted in a document.
#[derive(Debug, PartialEq, Eq)]
struct Quoted {
    /// 1-based line where the quote starts.
    line: usize,
    /// The arguments after the binary.
    args: Vec<String>,
}

/// The `ataman` commands quoted in `markdown`, in order.
fn quoted_commands(markdown: &str) -> Vec<Quoted> {
    let mut found = Vec::new();
    let mut in_fence = false;
    let mut pending: Option<(usize, String)> = None; // a code line continued by `\`
    let mut prose: Vec<(usize, &str)> = Vec::new(); // the current paragraph
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        if line.trim_start().starts_with("```") || line.trim_start().starts_with("~~~") {
            in_fence = !in_fence;
            found.extend(inline_commands(&prose));
            prose.clear();
            continue;
        }
        if in_fence {
            let (start, mut text) = pending.take().unwrap_or((number, String::new()));
            match line.trim_end().strip_suffix('\\') {
                Some(head) => {
                    text.push_str(head);
                    text.push(' ');
                    pending = Some((start, text));
                }
                None => {
                    text.push_str(line);
                    if let Some(args) = command_args(&text) {
                        found.push(Quoted { line: start, args });
                    }
                }
            }
        } else if line.trim().is_empty() {
            found.extend(inline_commands(&prose));
            prose.clear();
        } else {
            prose.push((number, line));
        }
    }
    found.extend(inline_commands(&prose));
    found
}

/// The commands in the inline code spans of one paragraph (a span may run
/// over a line break, never over a blank line).
fn inline_commands(paragraph: &[(usize, &str)]) -> Vec<Quoted> {
    let mut text = String::new();
    let mut line_of_byte = Vec::new();
    for (number, line) in paragraph {
        text.push_str(line);
        text.push(' ');
        line_of_byte.resize(text.len(), *number);
    }
    code_spans(&text)
        .into_iter()
        .filter_map(|(start, span)| {
            let args = command_args(span)?;
            Some(Quoted {
                line: line_of_byte[start],
                args,
            })
        })
        .collect()
}

/// The code spans of `text` with their byte offsets: a run of N backticks
/// opens a span that the next run of exactly N backticks closes
/// (CommonMark); a run without its match is literal text.
fn code_spans(text: &str) -> Vec<(usize, &str)> {
    let bytes = text.as_bytes();
    let run_at = |i: usize| bytes[i..].iter().take_while(|b| **b == b'`').count();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let opening = run_at(i);
        let content = i + opening;
        let mut j = content;
        let mut close = None;
        while j < bytes.len() {
            let run = run_at(j);
            if run == opening {
                close = Some(j);
                break;
            }
            j += run.max(1);
        }
        match close {
            Some(end) => {
                spans.push((i, text[content..end].trim()));
                i = end + opening;
            }
            None => i = content,
        }
    }
    spans
}

/// The arguments after the binary if `text` runs `ataman`, else `None`.
fn command_args(text: &str) -> Option<Vec<String>> {
    let words = shell_words(text);
    let mut rest = words
        .iter()
        .map(String::as_str)
        .skip_while(|w| *w == "$" || is_assignment(w))
        .collect::<Vec<_>>();
    if rest.first().copied() == Some("cargo") {
        rest = cargo_run_args(&rest)?;
    } else if rest.first().is_some_and(|w| WRAPPERS.contains(w)) {
        let binary = rest.iter().position(|w| is_binary(w))?;
        rest = rest[binary + 1..].to_vec();
    } else if rest.first().is_some_and(|w| is_binary(w)) {
        rest.remove(0);
    } else {
        return None;
    }
    let end = rest.iter().position(|w| *w == "…" || *w == "...");
    Some(
        rest[..end.unwrap_or(rest.len())]
            .iter()
            .map(|w| w.to_string())
            .collect(),
    )
}

/// `cargo run [OPTIONS] -- ARGS` of the `ataman` binary: ARGS.
fn cargo_run_args<'a>(words: &[&'a str]) -> Option<Vec<&'a str>> {
    if words.get(1).copied() != Some("run") {
        return None;
    }
    let separator = words.iter().position(|w| *w == "--")?;
    let options = &words[2..separator];
    let names_other = options.windows(2).any(|pair| {
        matches!(pair[0], "-p" | "--package" | "--bin" | "--example") && pair[1] != "ataman"
    });
    if names_other {
        return None;
    }
    Some(words[separator + 1..].to_vec())
}

fn is_binary(word: &str) -> bool {
    word == "ataman" || word.ends_with("/ataman")
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Splits a shell command line into words: quotes and backslashes as the
/// shell reads them; a `#` that starts a word begins a comment, and a
/// control operator (`|`, `&`, `;`, a redirection), even inside a word,
/// ends the command.
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                word.extend(chars.by_ref().take_while(|c| *c != '\''));
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            '|' | '&' | ';' | '>' | '<' => {
                // A metacharacter ends the word and the command; digits
                // right before a redirection name a file descriptor.
                let descriptor = matches!(c, '>' | '<')
                    && !word.is_empty()
                    && word.chars().all(|d| d.is_ascii_digit());
                if in_word && !descriptor {
                    words.push(word);
                }
                return words;
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Runs `ataman ARGS --help`: `Ok` when clap accepted every argument and
/// printed the help, else clap's message.
fn check(args: &[String]) -> Result<(), String> {
    if args.iter().any(|a| a == "--") {
        return Err("a quoted `--` would pass --help on as a value: not checked".into());
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(args)
        .arg("--help")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ataman");
    let started = Instant::now();
    while child.try_wait().expect("wait for ataman").is_none() {
        if started.elapsed() > HELP_WAIT_MAX {
            child.kill().expect("kill ataman");
            child.wait().expect("reap ataman");
            return Err(format!("no answer within {HELP_WAIT_MAX:?}: it ran"));
        }
        std::thread::sleep(HELP_POLL_INTERVAL);
    }
    let output = child.wait_with_output().expect("collect ataman's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.contains("Usage:") {
        Ok(())
    } else {
        Err(format!(
            "{}; stderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Every failing command of `markdown` (named `name` in the messages).
fn failures(name: &str, markdown: &str) -> Vec<String> {
    quoted_commands(markdown)
        .iter()
        .filter_map(|q| {
            let error = check(&q.args).err()?;
            Some(format!(
                "{name}:{}: `ataman {}`: {error}",
                q.line,
                q.args.join(" ")
            ))
        })
        .collect()
}

fn doc_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(name)
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Proves the documents' quoted commands all parse, and that there are some.
#[test]
fn every_quoted_command_parses() {
    let mut all = Vec::new();
    for name in DOCS {
        let text = std::fs::read_to_string(doc_path(name)).expect("read the document");
        let count = quoted_commands(&text).len();
        assert!(
            count >= COMMANDS_PER_DOC_MIN,
            "{name}: {count} commands found, expected at least {COMMANDS_PER_DOC_MIN}"
        );
        all.extend(failures(name, &text));
    }
    assert!(
        all.is_empty(),
        "quoted commands that do not parse:\n{}",
        all.join("\n")
    );
}

/// Proves the check fails: a bogus flag and a bad value planted in a
/// temporary copy of BENCHMARKS.md are the only two failures reported,
/// each with clap's message.
#[test]
fn planted_bad_flag_and_value_are_refused() {
    let text = std::fs::read_to_string(doc_path("BENCHMARKS.md")).expect("read BENCHMARKS.md");
    let fjall = "ataman bench fjall --ops 200000";
    let recovery = "ataman bench recovery --rows 10000000";
    assert!(
        text.contains(fjall) && text.contains(recovery),
        "the planting spots moved"
    );
    let planted = text
        .replacen(fjall, "ataman bench fjall --no-such-flag --ops 200000", 1)
        .replacen(recovery, "ataman bench recovery --rows ten-million", 1);
    let dir = tempfile::tempdir().expect("temporary directory");
    let copy = dir.path().join("BENCHMARKS.md");
    std::fs::write(&copy, planted).expect("write the copy");
    let copied = std::fs::read_to_string(&copy).expect("read the copy");
    let found = failures("copy", &copied);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].contains("--no-such-flag") && found[0].contains("unexpected argument"),
        "{}",
        found[0]
    );
    assert!(
        found[1].contains("ten-million") && found[1].contains("invalid value"),
        "{}",
        found[1]
    );
}

/// Proves value parsers run before `--help`: a duration, an enum and a
/// workload the parsers refuse each fail; the same commands with good
/// values pass.
#[test]
fn value_parsers_run_before_help() {
    let bad = [
        args(&[
            "bench",
            "http",
            "--url",
            "http://127.0.0.1:1",
            "--duration",
            "10q",
        ]),
        args(&[
            "bench",
            "http",
            "--url",
            "http://127.0.0.1:1",
            "--workload",
            "put-maybe",
        ]),
        args(&["bench", "engine", "--durability", "maybe"]),
        args(&["bench", "engine", "--ops", "1", "--ops", "2"]),
    ];
    for command in &bad {
        assert!(
            check(command).is_err(),
            "accepted: ataman {}",
            command.join(" ")
        );
    }
    let good = [
        args(&[
            "bench",
            "http",
            "--url",
            "http://127.0.0.1:1",
            "--duration",
            "10s",
        ]),
        args(&[
            "bench",
            "http",
            "--url",
            "http://127.0.0.1:1",
            "--workload",
            "mixed:90",
        ]),
        args(&["bench", "engine", "--durability", "complete"]),
    ];
    for command in &good {
        assert_eq!(check(command), Ok(()), "ataman {}", command.join(" "));
    }
}

/// Proves the extractor reads fenced lines (continued by `\`), inline spans
/// (over a line break too), `cargo run --` and wrapped or path-named
/// binaries, and stops at comments, operators and an ellipsis.
#[test]
fn extractor_finds_every_form() {
    let markdown = "\
Run `ataman bench fjall --ops 5` or
`ataman bench http --rate 1000
--threads 1`, or `ataman bench …`.

```sh
ataman bench engine --ops 10 \\
    --writers 2   # a comment
cargo run --release -- bench recovery --rows 100
valgrind --tool=callgrind target/release/ataman bench plot a.json --out b.svg
$ X=1 ./target/debug/ataman serve --data-dir /tmp/d &
ataman ctl status | head -1
ataman bench http --workload get-random|put-random 2>/dev/null
```
";
    let found = quoted_commands(markdown);
    let expected = vec![
        Quoted {
            line: 1,
            args: args(&["bench", "fjall", "--ops", "5"]),
        },
        Quoted {
            line: 2,
            args: args(&["bench", "http", "--rate", "1000", "--threads", "1"]),
        },
        Quoted {
            line: 3,
            args: args(&["bench"]),
        },
        Quoted {
            line: 6,
            args: args(&["bench", "engine", "--ops", "10", "--writers", "2"]),
        },
        Quoted {
            line: 8,
            args: args(&["bench", "recovery", "--rows", "100"]),
        },
        Quoted {
            line: 9,
            args: args(&["bench", "plot", "a.json", "--out", "b.svg"]),
        },
        Quoted {
            line: 10,
            args: args(&["serve", "--data-dir", "/tmp/d"]),
        },
        Quoted {
            line: 11,
            args: args(&["ctl", "status"]),
        },
        Quoted {
            line: 12,
            args: args(&["bench", "http", "--workload", "get-random"]),
        },
    ];
    assert_eq!(found, expected);
}

/// Proves scripts, other programs, other cargo binaries and prose that
/// merely mentions ataman are not taken for commands.
#[test]
fn extractor_skips_what_is_not_the_binary() {
    let markdown = "\
The `ataman_engine_wal_fsync_seconds` metric, `ataman-bench`, ``code with ` inside``.

```
bench/peers --quick
bench/http-ab.sh target/release/ataman target/release/ataman 3 5
ATAMAN=/tmp/ataman-before bench/cluster-rounds.sh 8s
cargo run -p ataman-sim --release -- --seeds 1..1000
curl -s http://127.0.0.1:19234/metrics
tarantool bench/tarantool_replace.lua DIR OPS N 1000000 100
```
";
    assert_eq!(quoted_commands(markdown), Vec::new());
}
