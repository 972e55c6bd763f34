//! The "## Layout" table of docs/ARCHITECTURE.md against the crates'
//! top-level modules: every `mod x;` (any visibility, any `#[cfg]` but
//! `test`) at the top of `crates/<c>/src/lib.rs` or `main.rs` must be named
//! in the table's first column as a backticked path, `<c>/src/x.rs` for a
//! file module or `<c>/src/x/` for a directory module (either, where both
//! exist); and every backticked path with a `/` in that column must exist,
//! from the repository's root or from `crates/`.

use crate::Violation;
use crate::lexer::{self, ident_at, matching_brace, skip_space, word_at};

/// The table's heading in docs/ARCHITECTURE.md.
pub const LAYOUT_HEADING: &str = "## Layout";

/// Top-level `mod x;` declarations of a crate root: (name, line).
pub fn declared_modules(root_src: &str) -> Vec<(String, usize)> {
    let code = lexer::strip_cfg_test(&lexer::blank(root_src)).code;
    let chars: Vec<char> = code.chars().collect();
    let line = lexer::line_of_index(&chars);
    let mut modules = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '{' {
            // Not top level: skip the block (an inline module, a function).
            i = matching_brace(&chars, i).map_or(chars.len(), |close| close + 1);
            continue;
        }
        if chars[i] == 'm' && word_at(&chars, i, "mod") {
            let at = skip_space(&chars, i + 3);
            let name = ident_at(&chars, at);
            let after = skip_space(&chars, at + name.chars().count());
            if !name.is_empty() && chars.get(after) == Some(&';') {
                modules.push((name, line[i]));
            }
        }
        i += 1;
    }
    modules
}

/// Backticked spans of the first column of the layout table: (text, line).
pub fn layout_first_column(architecture_md: &str) -> Vec<(String, usize)> {
    let mut cells = Vec::new();
    let mut inside = false;
    for (n, line) in architecture_md.lines().enumerate() {
        if line.starts_with("## ") {
            inside = line.trim_end() == LAYOUT_HEADING;
            continue;
        }
        let Some(row) = line.trim_start().strip_prefix('|').filter(|_| inside) else {
            continue;
        };
        let first = row.split('|').next().unwrap_or_default();
        for (k, span) in first.split('`').enumerate() {
            if k % 2 == 1 {
                cells.push((span.trim().to_string(), n + 1));
            }
        }
    }
    cells
}

/// Modules of crate `name` (`crates/<name>/src/<root>`) missing from the
/// table; `exists` answers for a path from the repository's root.
pub fn missing_modules(
    name: &str,
    root: &str,
    modules: &[(String, usize)],
    table: &[(String, usize)],
    exists: &dyn Fn(&str) -> bool,
) -> Vec<Violation> {
    let mut missing = Vec::new();
    for (module, line) in modules {
        let file = format!("{name}/src/{module}.rs");
        let dir = format!("{name}/src/{module}/");
        let mut accepted: Vec<&String> = [&file, &dir]
            .into_iter()
            .filter(|p| exists(&format!("crates/{p}")))
            .collect();
        if accepted.is_empty() {
            accepted = vec![&file, &dir];
        }
        if !table.iter().any(|(cell, _)| accepted.contains(&cell)) {
            let want: Vec<String> = accepted.iter().map(|p| format!("`{p}`")).collect();
            missing.push(Violation::new(
                &format!("crates/{name}/src/{root}"),
                *line,
                format!(
                    "module `{module}` is missing from the first column of the \"{LAYOUT_HEADING}\" \
                     table in docs/ARCHITECTURE.md: name it there as {}",
                    want.join(" or ")
                ),
            ));
        }
    }
    missing
}

/// Paths in the table's first column that name nothing.
pub fn stale_paths(table: &[(String, usize)], exists: &dyn Fn(&str) -> bool) -> Vec<Violation> {
    table
        .iter()
        .filter(|(cell, _)| cell.contains('/') && !cell.contains(' '))
        .filter(|(cell, _)| !exists(cell) && !exists(&format!("crates/{cell}")))
        .map(|(cell, line)| {
            Violation::new(
                "docs/ARCHITECTURE.md",
                *line,
                format!("the \"{LAYOUT_HEADING}\" table names `{cell}`, which does not exist"),
            )
        })
        .collect()
}

#[test]
fn planted_missing_module_is_reported() {
    let lib = "//! mod in_a_comment;\npub mod listed;\n#[cfg(feature = \"x\")]\npub(crate) mod \
               unlisted;\nmod dir_mod;\n#[cfg(test)]\nmod tests;\nmod inline { mod deeper; }\n";
    let modules = declared_modules(lib);
    let names: Vec<&str> = modules.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(names, ["listed", "unlisted", "dir_mod"]);
    let md = "# A\n## Layout\n| path | role |\n| --- | --- |\n| `c/src/listed.rs`, `c/src/dir_mod/` \
              | x `c/src/unlisted.rs` |\n| `c/src/gone.rs` | y |\n## Next\n| `c/src/unlisted.rs` | z |\n";
    let table = layout_first_column(md);
    let exists = |p: &str| p == "crates/c/src/listed.rs" || p == "crates/c/src/dir_mod/";
    let missing = missing_modules("c", "lib.rs", &modules, &table, &exists);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(missing[0].place, "crates/c/src/lib.rs:4");
    assert!(
        missing[0].message.contains("`unlisted`"),
        "{}",
        missing[0].message
    );
    let stale = stale_paths(&table, &exists);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(stale[0].place, "docs/ARCHITECTURE.md:6");
    assert!(stale[0].message.contains("`c/src/gone.rs`"));
}

#[test]
fn a_directory_module_may_be_named_either_way_where_both_exist() {
    let modules = vec![("hints".to_string(), 1)];
    let exists = |p: &str| p == "crates/n/src/hints.rs" || p == "crates/n/src/hints/";
    for cell in ["n/src/hints.rs", "n/src/hints/"] {
        let table = vec![(cell.to_string(), 1)];
        assert!(missing_modules("n", "lib.rs", &modules, &table, &exists).is_empty());
    }
    let table = vec![("n/src/hints".to_string(), 1)];
    assert_eq!(
        missing_modules("n", "lib.rs", &modules, &table, &exists).len(),
        1
    );
}
