//! `tidy`: checks of the repository's own sources that no compiler or
//! linter makes, each failing with the file and line to fix.
//!
//! - No function in `crates/*/src` (tests there included) is longer than
//!   [`FUNCTION_LINES_MAX`], a ratchet: today's longest, to be lowered as
//!   code is split (the test says so once the longest is shorter).
//! - No `.rs` file of the crates, the fuzz targets or `bench/http-framing`
//!   is longer than [`FILE_LINES_MAX`].
//! - Every top-level module of every crate is named in the "## Layout" table
//!   of docs/ARCHITECTURE.md, and every path that table names exists
//!   ([`layout`]).
//! - `clippy::too_many_arguments` is allowed no more often than
//!   [`ALLOW_TOO_MANY_ARGUMENTS_MAX`], a ratchet like the first.
//! - No import cycle between the top-level modules of a crate beyond
//!   [`KNOWN_CYCLES`], which only shrinks ([`cycles`]).
//!
//! Each scanner reads source through [`lexer::blank`], so comments and
//! string literals never count, and each is shown to fail on a planted
//! input by the tests next to it. Run with `cargo test -p ataman --test
//! tidy`; `-- --nocapture` prints each crate's module graph.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod cycles;
mod functions;
mod layout;
mod lexer;

use std::fmt;
use std::path::{Path, PathBuf};

/// Longest function allowed, in lines from `fn` to its closing brace: the
/// longest in `crates/*/src` when this check was written. Lower it when
/// the longest is split; never raise it.
const FUNCTION_LINES_MAX: usize = 181;

/// Longest source file allowed, in lines.
const FILE_LINES_MAX: usize = 1_100;

/// `clippy::too_many_arguments` allowances in the sources when this check
/// was written. Lower it when one goes; never raise it.
const ALLOW_TOO_MANY_ARGUMENTS_MAX: usize = 5;

/// The workspace crates, as folders of `crates/`.
const CRATES: [&str; 6] = ["engine", "node", "bench", "ataman", "sim", "testkit"];

/// The crate roots whose `mod` declarations are the top-level modules.
const CRATE_ROOTS: [&str; 2] = ["lib.rs", "main.rs"];

/// Import cycles between top-level modules tolerated, by crate (the same
/// as `shared/tools/module_cycles.py` finds). There were five when this
/// check was written; issue 15 broke them all, so any cycle now fails.
/// Never add one.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// One failed rule: where, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `path:line`, the path from the repository's root.
    pub place: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl Violation {
    /// A violation at `path:line`.
    pub fn new(path: &str, line: usize, message: String) -> Violation {
        Violation {
            place: format!("{path}:{line}"),
            message,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.message)
    }
}

/// Panics listing `violations`, if any, under `rule`.
fn assert_none(rule: &str, violations: &[Violation]) {
    if !violations.is_empty() {
        let lines: Vec<String> = violations.iter().map(|v| format!("  {v}")).collect();
        panic!("tidy: {rule}:\n{}", lines.join("\n"));
    }
}

/// The repository's root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `path` from the repository's root, with `/` separators.
fn relative(path: &Path) -> String {
    let root = repo_root();
    let rel = path.strip_prefix(&root).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

/// Every `.rs` file under `dir`, sorted; `target` and hidden folders skipped.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// `crates/<c>/src` of every crate.
fn crate_sources() -> Vec<PathBuf> {
    CRATES
        .iter()
        .map(|c| repo_root().join("crates").join(c).join("src"))
        .collect()
}

/// Every `.rs` file the file-length rule covers.
fn all_sources() -> Vec<PathBuf> {
    let root = repo_root();
    ["crates", "fuzz", "bench/http-framing"]
        .iter()
        .flat_map(|dir| rust_files(&root.join(dir)))
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Functions of `src` (at `path`) longer than `max` lines.
fn long_functions(path: &str, src: &str, max: usize) -> Vec<Violation> {
    functions::function_spans(src)
        .into_iter()
        .filter(|f| f.lines() > max)
        .map(|f| {
            let message = format!(
                "fn {} is {} lines, over FUNCTION_LINES_MAX = {max} (tidy/main.rs): split it",
                f.name,
                f.lines()
            );
            Violation::new(path, f.first_line, message)
        })
        .collect()
}

/// The file `src` (at `path`) if it is longer than `max` lines.
fn long_file(path: &str, src: &str, max: usize) -> Option<Violation> {
    let lines = src.lines().count();
    (lines > max).then(|| {
        let message =
            format!("{lines} lines, over FILE_LINES_MAX = {max}: split it (one idea per file)");
        Violation::new(path, max + 1, message)
    })
}

/// Lines of the `clippy::too_many_arguments` allowances in `src`.
fn too_many_arguments_allowances(src: &str) -> Vec<usize> {
    lexer::blank(src)
        .lines()
        .enumerate()
        .filter(|(_, line)| line.contains("clippy::too_many_arguments"))
        .map(|(n, _)| n + 1)
        .collect()
}

#[test]
fn functions_are_at_most_function_lines_max() {
    let mut violations = Vec::new();
    let mut all = Vec::new();
    for file in crate_sources().iter().flat_map(|dir| rust_files(dir)) {
        let (path, src) = (relative(&file), read(&file));
        for f in functions::function_spans(&src) {
            all.push((f.lines(), format!("{path}:{} fn {}", f.first_line, f.name)));
        }
        violations.extend(long_functions(&path, &src, FUNCTION_LINES_MAX));
    }
    all.sort_by(|a, b| b.cmp(a));
    println!("the longest functions (lines from `fn` to its closing brace):");
    for (lines, place) in all.iter().take(10) {
        println!("  {lines:4} {place}");
    }
    assert_none("functions longer than the ratchet", &violations);
    let longest = all.first().cloned().unwrap_or_default();
    assert_eq!(
        longest.0, FUNCTION_LINES_MAX,
        "tidy: the longest function is now {} ({} lines): lower FUNCTION_LINES_MAX (tidy/main.rs) to {}",
        longest.1, longest.0, longest.0
    );
}

#[test]
fn files_are_at_most_file_lines_max() {
    let violations: Vec<Violation> = all_sources()
        .iter()
        .filter_map(|file| long_file(&relative(file), &read(file), FILE_LINES_MAX))
        .collect();
    assert_none("files longer than FILE_LINES_MAX", &violations);
}

#[test]
fn every_top_level_module_is_in_the_layout_table() {
    let root = repo_root();
    let table = layout::layout_first_column(&read(&root.join("docs/ARCHITECTURE.md")));
    let exists = |p: &str| root.join(p).exists();
    let mut violations = layout::stale_paths(&table, &exists);
    for name in CRATES {
        for crate_root in CRATE_ROOTS {
            let file = root.join("crates").join(name).join("src").join(crate_root);
            if file.exists() {
                let modules = layout::declared_modules(&read(&file));
                violations.extend(layout::missing_modules(
                    name, crate_root, &modules, &table, &exists,
                ));
            }
        }
    }
    assert_none("the Layout table of docs/ARCHITECTURE.md", &violations);
}

#[test]
fn too_many_arguments_allowances_do_not_grow() {
    let mut places = Vec::new();
    for file in all_sources() {
        let path = relative(&file);
        for line in too_many_arguments_allowances(&read(&file)) {
            places.push(format!("  {path}:{line}"));
        }
    }
    let clippy_toml = read(&repo_root().join("clippy.toml"));
    assert!(
        !clippy_toml.contains("too-many-arguments-threshold"),
        "tidy: clippy.toml raises too-many-arguments-threshold: pass a struct instead"
    );
    assert!(
        places.len() <= ALLOW_TOO_MANY_ARGUMENTS_MAX,
        "tidy: {} allowances of clippy::too_many_arguments, over ALLOW_TOO_MANY_ARGUMENTS_MAX = {}: \
         pass a struct instead of adding one:\n{}",
        places.len(),
        ALLOW_TOO_MANY_ARGUMENTS_MAX,
        places.join("\n")
    );
    assert_eq!(
        places.len(),
        ALLOW_TOO_MANY_ARGUMENTS_MAX,
        "tidy: only {} allowances of clippy::too_many_arguments are left: lower \
         ALLOW_TOO_MANY_ARGUMENTS_MAX (tidy/main.rs) to {}",
        places.len(),
        places.len()
    );
}

#[test]
fn no_import_cycle_beyond_the_known_ones() {
    let mut failures = Vec::new();
    for (name, src) in CRATES.iter().zip(crate_sources()) {
        let files: Vec<(String, String)> = rust_files(&src)
            .iter()
            .map(|f| {
                let rel = f
                    .strip_prefix(&src)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                (rel, read(f))
            })
            .collect();
        let graph = cycles::module_graph(&files);
        println!("crates/{name}: top-level module graph");
        for (module, deps) in &graph {
            println!("  {module} -> {}", cycles::show(deps));
        }
        let found = cycles::cycles(&graph);
        let shown: Vec<String> = found.iter().map(cycles::show).collect();
        println!(
            "  cycles: {}",
            if shown.is_empty() {
                "none".to_string()
            } else {
                shown.join("; ")
            }
        );
        let known: Vec<&[&str]> = KNOWN_CYCLES
            .iter()
            .filter(|(c, _)| c == name)
            .map(|(_, cycle)| *cycle)
            .collect();
        failures.extend(cycles::check_cycles(name, &found, &known));
    }
    assert!(
        failures.is_empty(),
        "tidy: import cycles:\n  {}",
        failures.join("\n  ")
    );
}

/// The scanners trust [`lexer::blank`]; a file it misreads (a literal or
/// comment form it does not know) would unbalance its brackets.
#[test]
fn the_lexer_reads_every_source_file() {
    let mut violations = Vec::new();
    for file in all_sources() {
        let code = lexer::blank(&read(&file));
        for (open, close) in [('{', '}'), ('(', ')'), ('[', ']')] {
            let (opens, closes) = (code.matches(open).count(), code.matches(close).count());
            if opens != closes {
                let message = format!(
                    "{opens} '{open}' but {closes} '{close}' once comments and literals are \
                     blanked: teach tidy/lexer.rs what it misread"
                );
                violations.push(Violation::new(&relative(&file), 1, message));
            }
        }
    }
    assert_none("sources the tidy lexer misreads", &violations);
}

#[test]
fn planted_long_file_and_function_are_reported() {
    let src = format!("fn long() {{\n{}}}\n", "    let _ = 1;\n".repeat(30));
    let v = long_functions("x.rs", &src, 31);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(
        v[0].to_string(),
        "x.rs:1: fn long is 32 lines, over FUNCTION_LINES_MAX = 31 (tidy/main.rs): split it"
    );
    assert!(long_functions("x.rs", &src, 32).is_empty());
    let v = long_file("x.rs", &src, 31).unwrap();
    assert_eq!(v.place, "x.rs:32");
    assert!(long_file("x.rs", &src, 32).is_none());
}

#[test]
fn planted_allowances_are_counted_in_code_only() {
    let src = "#[allow(clippy::too_many_arguments)]\nfn f() {}\n// #[allow(clippy::too_many_arguments)]\n\
               #[expect(clippy::too_many_arguments, reason = \"x\")]\nfn g() {}\n";
    assert_eq!(too_many_arguments_allowances(src), [1, 4]);
}
