//! The one lexical pass every tidy scanner starts from: Rust source with
//! comments (doc comments too), string literals and char literals replaced
//! by spaces. Newlines are kept, so a line number in the blanked text is the
//! line number in the file, and what is left is code alone: a `{` is a
//! brace, `crate::x` is a path, `fn` is the keyword.
//!
//! Not a full Rust lexer: it knows line and (nested) block comments,
//! `"…"` strings with escapes (so `b"…"` and `c"…"` too), raw strings
//! `r#"…"#` (and `br`, `cr`), and char literals `'x'`, `'\n'`, `'\u{..}'`
//! as distinct from lifetimes `'a`.

/// `src` with comments and literals blanked (see the module comment).
pub fn blank(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = chars.clone();
    for (start, end) in non_code(&chars) {
        blank_range(&mut out, start, end);
    }
    out.into_iter().collect()
}

/// `src` with everything but doc comments (`///`, `//!`, `/** */`,
/// `/*! */`) blanked: where intra-doc links are.
pub fn doc_comments(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = chars.clone();
    let mut from = 0;
    for (start, end) in non_code(&chars) {
        let is_doc = match chars.get(start + 1..start + 4) {
            Some(['/', '/', next] | ['*', '*', next]) => *next != chars[start + 1] && *next != '/',
            Some(['/', '!', _] | ['*', '!', _]) => true,
            _ => false,
        };
        if !is_doc {
            blank_range(&mut out, start, end);
        }
        blank_range(&mut out, from, start);
        from = end;
    }
    blank_range(&mut out, from, chars.len());
    out.into_iter().collect()
}

/// Spaces over `chars[start..end]`, newlines kept.
pub fn blank_range(chars: &mut [char], start: usize, end: usize) {
    for c in &mut chars[start..end] {
        if *c != '\n' {
            *c = ' ';
        }
    }
}

/// Ranges `[start, end)` of the comments and literals of `chars`.
fn non_code(chars: &[char]) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let end = match chars[i] {
            '/' if chars.get(i + 1) == Some(&'/') => line_comment_end(chars, i),
            '/' if chars.get(i + 1) == Some(&'*') => block_comment_end(chars, i),
            '"' => string_end(chars, i + 1),
            '\'' => char_literal_end(chars, i),
            'r' | 'b' | 'c' if starts_token(chars, i) => raw_string_end(chars, i),
            _ => None,
        };
        match end {
            Some(end) => {
                ranges.push((i, end.min(chars.len())));
                i = end;
            }
            None => i += 1,
        }
    }
    ranges
}

/// Whether `c` can continue an identifier.
pub fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Index of the `}` closing the `{` at `open`, in blanked chars.
pub fn matching_brace(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Index of the first `{` or `;` from `from` outside parentheses and
/// brackets: where an item's head (`fn f(..) -> [u8; 4]`, `mod m`) ends.
pub fn head_end(chars: &[char], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in chars.iter().enumerate().skip(from) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '{' | ';' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// Line (1-based) of every char index, and one past the end.
pub fn line_of_index(chars: &[char]) -> Vec<usize> {
    let mut line = 1;
    let mut lines = Vec::with_capacity(chars.len() + 1);
    for &c in chars {
        lines.push(line);
        if c == '\n' {
            line += 1;
        }
    }
    lines.push(line);
    lines
}

/// The identifier starting at `i` (empty if none does).
pub fn ident_at(chars: &[char], i: usize) -> String {
    let rest = chars.get(i..).unwrap_or_default();
    let rest = if rest.starts_with(&['r', '#']) {
        &rest[2..]
    } else {
        rest
    };
    match rest.first() {
        Some(&c) if c.is_alphabetic() || c == '_' => {
            rest.iter().take_while(|&&c| is_ident_char(c)).collect()
        }
        _ => String::new(),
    }
}

/// Whether the keyword or identifier `word` stands alone at `i`.
pub fn word_at(chars: &[char], i: usize, word: &str) -> bool {
    let len = word.chars().count();
    starts_token(chars, i)
        && chars[i..].iter().take(len).copied().eq(word.chars())
        && chars.get(i + len).is_none_or(|&c| !is_ident_char(c))
}

/// Index of the first non-whitespace char at or after `i`.
pub fn skip_space(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// Blanked code without its `#[cfg(test)]` items.
pub struct NonTest {
    /// The code, `#[cfg(test)]` items blanked too.
    pub code: String,
    /// Names of the `mod x;` among those items: test-only files.
    pub test_mods: Vec<String>,
    /// Char ranges `[start, end)` of those items.
    pub test_ranges: Vec<(usize, usize)>,
}

/// Blanked source (see [`blank`]) with every `#[cfg(test)]` item blanked
/// too (an attribute, then an item up to its `;` or matching `}`).
pub fn strip_cfg_test(blanked: &str) -> NonTest {
    let mut chars: Vec<char> = blanked.chars().collect();
    let mut test_mods = Vec::new();
    let mut test_ranges = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let Some(after) = attribute_end(&chars, i).filter(|&end| {
            let attr: String = chars[i..end]
                .iter()
                .filter(|c| !c.is_whitespace())
                .collect();
            attr == "#[cfg(test)]"
        }) else {
            i += 1;
            continue;
        };
        let mut item = skip_space(&chars, after);
        while let Some(end) = attribute_end(&chars, item) {
            item = skip_space(&chars, end);
        }
        let Some(head) = head_end(&chars, item) else {
            break;
        };
        let end = match chars[head] {
            ';' => head + 1,
            _ => matching_brace(&chars, head).map_or(chars.len(), |close| close + 1),
        };
        let head_words: String = chars[item..head].iter().collect();
        let words: Vec<&str> = head_words.split_whitespace().collect();
        if chars[head] == ';' && words.len() >= 2 && words[words.len() - 2] == "mod" {
            test_mods.push(words[words.len() - 1].to_string());
        }
        blank_range(&mut chars, i, end);
        test_ranges.push((i, end));
        i = end;
    }
    NonTest {
        code: chars.into_iter().collect(),
        test_mods,
        test_ranges,
    }
}

/// End (exclusive) of the outer attribute `#[..]` at `i`, if one is there.
fn attribute_end(chars: &[char], i: usize) -> Option<usize> {
    if chars.get(i) != Some(&'#') || chars.get(skip_space(chars, i + 1)) != Some(&'[') {
        return None;
    }
    let mut depth = 0usize;
    for (j, &c) in chars.iter().enumerate().skip(i + 1) {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether a token starts at `i` (the previous char cannot continue one).
fn starts_token(chars: &[char], i: usize) -> bool {
    i == 0 || !is_ident_char(chars[i - 1])
}

/// End (exclusive) of the line comment at `start`: the newline stays.
fn line_comment_end(chars: &[char], start: usize) -> Option<usize> {
    let len = chars[start..].iter().position(|&c| c == '\n');
    Some(len.map_or(chars.len(), |len| start + len))
}

/// End (exclusive) of the block comment at `start`, nesting counted.
fn block_comment_end(chars: &[char], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => {
                depth += 1;
                i += 2;
            }
            ('*', '/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    Some(chars.len())
}

/// End (exclusive) of a `"`-string whose contents start at `from`.
fn string_end(chars: &[char], from: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    Some(chars.len())
}

/// End (exclusive) of the char literal at `start`, or `None` for a lifetime
/// or a label.
fn char_literal_end(chars: &[char], start: usize) -> Option<usize> {
    match chars.get(start + 1) {
        Some('\\') => {
            let close = chars.get(start + 3..)?.iter().position(|&c| c == '\'')?;
            Some(start + 3 + close + 1)
        }
        Some(_) if chars.get(start + 2) == Some(&'\'') => Some(start + 3),
        _ => None,
    }
}

/// End (exclusive) of the raw string starting at `start` (`r`, `br` or
/// `cr`, then `#`s and a quote), or `None` if none starts there.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let mut i = start;
    if chars[i] != 'r' {
        i += 1;
        if chars.get(i) != Some(&'r') {
            return None;
        }
    }
    i += 1;
    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
    i += hashes;
    if chars.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    while i < chars.len() {
        if chars[i] == '"'
            && chars[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(chars.len())
}

#[test]
fn comments_and_literals_are_blanked_lines_kept() {
    let src = "let a = \"{ // }\"; // c {\n/* x /* y */ { */ let b = '{';\nlet c = r#\"}\"#; 'l: loop {}\n";
    let out = blank(src);
    assert_eq!(out.lines().count(), 3);
    assert_eq!(out.matches('{').count(), 1, "{out}");
    assert_eq!(out.matches('}').count(), 1, "{out}");
    assert!(out.contains("'l: loop"), "a label is code: {out}");
}

#[test]
fn escapes_and_lifetimes() {
    let out = blank("f('\\'', \"\\\"}\", b'}', &'a x, '\\u{7b}');");
    assert!(out.contains("&'a x"), "{out}");
    assert_eq!(out.matches('}').count(), 0, "{out}");
}

#[test]
fn cfg_test_items_are_blanked() {
    let src = "use crate::a;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\n#[path = \"x.rs\"]\nmod other_tests;\nuse crate::b;\n#[cfg(test)]\nmod inline {\n    use crate::c;\n}\nuse crate::d;\n";
    let stripped = strip_cfg_test(&blank(src));
    let out = stripped.code;
    assert_eq!(stripped.test_mods, ["tests", "other_tests"]);
    assert_eq!(stripped.test_ranges.len(), 3);
    assert_eq!(out.lines().count(), src.lines().count());
    assert!(
        out.contains("crate::a") && out.contains("crate::b") && out.contains("crate::d"),
        "{out}"
    );
    assert!(!out.contains("crate::c") && !out.contains("mod"), "{out}");
}

#[test]
fn doc_comments_alone() {
    let src = "/// [`crate::a`]\n//! b\n// c\n//// d\n/** e */ /*! f */ /* g */ /**/ h \"i\"\n";
    let out = doc_comments(src);
    assert_eq!(out.lines().count(), src.lines().count());
    let words: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(words, "/// [`crate::a`] //! b /** e */ /*! f */");
}
