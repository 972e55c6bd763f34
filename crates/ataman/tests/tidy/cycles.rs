//! Import cycles between the top-level modules of a crate.
//!
//! The graph: module `a` depends on `b` when non-test code in `a`'s files
//! names a path `crate::b…` (in a `use`, a group `crate::{b, c::d}` or an
//! expression), or a `super::…` chain that climbs to the crate root and
//! then names `b`; so does a doc comment (an intra-doc link such as
//! [`crate::b::X`] is a path rustdoc resolves, and `.ci/run` denies broken
//! ones, so it ties `a` to `b` as an import does; this is also what
//! `shared/tools/module_cycles.py` counts). Plain comments and literals do
//! not count ([`lexer::blank`]); nor do `#[cfg(test)]` items, files declared
//! by one (`#[cfg(test)] mod x;`), and files named `tests.rs`, `*_tests.rs`
//! or under a `tests/` folder (the house names of test files, for those
//! declared through `#[path]`). A cycle is a strongly connected component
//! of two or more modules.

use crate::lexer::{self, ident_at, matching_brace, skip_space, word_at};
use std::collections::{BTreeMap, BTreeSet};

/// Top-level module → the top-level modules it names.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The graph of one crate from its source files: (path from `src/`, text).
pub fn module_graph(files: &[(String, String)]) -> Graph {
    let mut stripped = Vec::new();
    let mut test_files = BTreeSet::new();
    for (path, src) in files {
        let non_test = lexer::strip_cfg_test(&lexer::blank(src));
        let base = child_dir(path);
        for m in &non_test.test_mods {
            test_files.insert(format!("{base}{m}.rs"));
            test_files.insert(format!("{base}{m}/"));
        }
        let mut docs: Vec<char> = lexer::doc_comments(src).chars().collect();
        for &(start, end) in &non_test.test_ranges {
            lexer::blank_range(&mut docs, start, end);
        }
        let code: Vec<char> = non_test.code.chars().collect();
        stripped.push((path, code, docs));
    }
    let is_test = |path: &str| {
        let name = path.rsplit('/').next().unwrap_or(path);
        name == "tests.rs"
            || name.ends_with("_tests.rs")
            || path.starts_with("tests/")
            || path.contains("/tests/")
            || test_files.contains(path)
            || test_files
                .iter()
                .any(|t| t.ends_with('/') && path.starts_with(t.as_str()))
    };
    let mut graph = Graph::new();
    for (path, code, docs) in &stripped {
        let Some(top) = top_module(path) else {
            continue;
        };
        let deps = graph.entry(top.clone()).or_default();
        if !is_test(path) {
            let inline = inline_modules(code);
            deps.extend(named_modules(code, depth(path), &inline));
            deps.extend(named_modules(docs, depth(path), &inline));
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (top, deps) in &mut graph {
        deps.retain(|d| d != top && modules.contains(d));
    }
    graph
}

/// The top-level module a file belongs to; `None` for the crate roots.
fn top_module(path: &str) -> Option<String> {
    if path == "lib.rs" || path == "main.rs" {
        return None;
    }
    let first = path.split('/').next().unwrap_or(path);
    Some(first.strip_suffix(".rs").unwrap_or(first).to_string())
}

/// Components of a file's module path (`a/b.rs` and `a/b/mod.rs`: 2).
fn depth(path: &str) -> usize {
    let parts = path.split('/').count();
    if path.ends_with("/mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// Folder (from `src/`, with a trailing `/`, or empty) of the files of the
/// modules a file declares.
fn child_dir(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').map_or(("", path), |(d, n)| (d, n));
    let dir = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    match name {
        "lib.rs" | "main.rs" | "mod.rs" => dir,
        _ => format!("{dir}{}/", name.strip_suffix(".rs").unwrap_or(name)),
    }
}

/// Top-level modules named in `chars` (the code or the doc comments) of a
/// file at module `depth`, with `inline` modules at those char ranges.
fn named_modules(chars: &[char], depth: usize, inline: &[(usize, usize)]) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let path_colons = |at: usize| chars.get(at..at + 2) == Some(&[':', ':'][..]);
        if word_at(chars, i, "crate") && (i == 0 || chars[i - 1] != '$') && path_colons(i + 5) {
            named.extend(path_heads(chars, skip_space(chars, i + 7)));
            i += 7;
        } else if word_at(chars, i, "super") && path_colons(i + 5) {
            let nesting = inline
                .iter()
                .filter(|(open, close)| *open < i && i < *close)
                .count();
            let mut climbs = 0;
            let mut j = i;
            while word_at(chars, j, "super") && path_colons(j + 5) {
                climbs += 1;
                j = skip_space(chars, j + 7);
            }
            if climbs == depth + nesting {
                named.extend(path_heads(chars, j));
            }
            i = j;
        } else {
            i += 1;
        }
    }
    named
}

/// Brace ranges of inline `mod x { … }` blocks.
fn inline_modules(chars: &[char]) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    for i in 0..chars.len() {
        if chars[i] == 'm' && word_at(chars, i, "mod") {
            let at = skip_space(chars, i + 3);
            let name = ident_at(chars, at);
            let open = skip_space(chars, at + name.chars().count());
            if !name.is_empty()
                && chars.get(open) == Some(&'{')
                && let Some(close) = matching_brace(chars, open)
            {
                ranges.push((open, close));
            }
        }
    }
    ranges
}

/// The first segment of the path at `at`, or of each item of the group
/// `{a, b::c, d as e}` there.
fn path_heads(chars: &[char], at: usize) -> Vec<String> {
    if chars.get(at) != Some(&'{') {
        return vec![ident_at(chars, at)];
    }
    let Some(close) = matching_brace(chars, at) else {
        return Vec::new();
    };
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut item_start = true;
    for i in at + 1..close {
        match chars[i] {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if c.is_whitespace() => {}
            _ if item_start => {
                heads.push(ident_at(chars, i));
                item_start = false;
            }
            _ => {}
        }
    }
    heads
}

/// Strongly connected components of two or more modules (Tarjan), each
/// sorted, in order of their first module.
pub fn cycles(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct Tarjan<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<BTreeSet<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().rposition(|&m| m == v).unwrap_or(0);
                let component: BTreeSet<String> =
                    self.stack.drain(at..).map(str::to_string).collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !tarjan.index.contains_key(v.as_str()) {
            tarjan.visit(v);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

/// Failures of crate `name`'s cycles against its ratchet: a cycle not in
/// `known` (new, grown or shrunk) and a known one no longer there.
pub fn check_cycles(name: &str, found: &[BTreeSet<String>], known: &[&[&str]]) -> Vec<String> {
    let known: Vec<BTreeSet<String>> = known
        .iter()
        .map(|c| c.iter().map(|m| m.to_string()).collect())
        .collect();
    let mut failures = Vec::new();
    for cycle in found.iter().filter(|c| !known.contains(c)) {
        match known.iter().find(|k| cycle.is_subset(k)) {
            Some(old) => failures.push(format!(
                "crates/{name}: the import cycle {} shrank to {}: good; replace it in KNOWN_CYCLES \
                 (tidy/main.rs) by the smaller one",
                show(old),
                show(cycle)
            )),
            None => failures.push(format!(
                "crates/{name}: new import cycle between top-level modules {}: make the \
                 dependency one-way (the graph is printed above)",
                show(cycle)
            )),
        }
    }
    for old in known.iter().filter(|k| !found.contains(k)) {
        if !found.iter().any(|c| c.is_subset(old)) {
            failures.push(format!(
                "crates/{name}: the known import cycle {} is gone: remove it from the list \
                 (KNOWN_CYCLES in tidy/main.rs), so it cannot come back",
                show(old)
            ));
        }
    }
    failures
}

/// `{a, b, c}`.
pub fn show(modules: &BTreeSet<String>) -> String {
    let names: Vec<&str> = modules.iter().map(String::as_str).collect();
    format!("{{{}}}", names.join(", "))
}

/// The graph of planted files.
fn planted(files: &[(&str, &str)]) -> Graph {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect();
    module_graph(&files)
}

#[test]
fn planted_cycle_is_found_and_reported() {
    let graph = planted(&[
        ("lib.rs", "pub mod a; pub mod b; pub mod c; pub mod d;"),
        (
            "a.rs",
            "use crate::{b::X, d as D};\n// crate::c in a comment\nfn f() { let s = \"crate::c\"; }",
        ),
        ("b/mod.rs", "mod inner;\n"),
        (
            "b/inner.rs",
            "use super::super::a::Y;\nmod deep { use super::super::super::c; }",
        ),
        (
            "c.rs",
            "pub fn g() { crate::d::h() }\n#[cfg(test)]\nmod tests { use crate::a; }",
        ),
        ("d.rs", "use self::x; use super::a as _;"),
        (
            "e.rs",
            "//! Called by [`crate::a`].\n// crate::b\n/// [`X`](crate::c::X)\npub struct X;",
        ),
    ]);
    let edges = |m: &str| graph[m].iter().cloned().collect::<Vec<_>>();
    assert_eq!(edges("a"), ["b", "d"]);
    assert_eq!(edges("b"), ["a", "c"]);
    assert_eq!(edges("c"), ["d"]);
    assert_eq!(edges("d"), ["a"]);
    assert_eq!(edges("e"), ["a", "c"]);
    let found = cycles(&graph);
    assert_eq!(found.len(), 1);
    assert_eq!(show(&found[0]), "{a, b, c, d}");
    assert!(check_cycles("x", &found, &[&["a", "b", "c", "d"]]).is_empty());
    let new = check_cycles("x", &found, &[]);
    assert!(
        new.len() == 1 && new[0].contains("new import cycle"),
        "{new:?}"
    );
    let gone = check_cycles("x", &[], &[&["a", "b"]]);
    assert!(
        gone.len() == 1 && gone[0].contains("remove it from the list"),
        "{gone:?}"
    );
    let shrank = check_cycles("x", &found, &[&["a", "b", "c", "d", "e"]]);
    assert!(
        shrank.len() == 1 && shrank[0].contains("shrank"),
        "{shrank:?}"
    );
}

#[test]
fn test_files_do_not_count() {
    let graph = planted(&[
        ("a.rs", "#[cfg(test)]\nmod support;\nuse crate::b;"),
        ("a/support.rs", "use crate::c;"),
        ("b/tests/mod.rs", "use crate::a;"),
        ("b/x_tests.rs", "use crate::a;"),
        ("b.rs", "#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;"),
        ("c.rs", "use crate::a;"),
    ]);
    assert!(cycles(&graph).is_empty(), "{graph:?}");
}
