//! Function lengths, by brace matching over blanked source
//! ([`lexer::blank`]): a function is the keyword `fn` followed by a name,
//! then a head that ends at the first `{` outside parentheses and brackets
//! (a `;` there is a body-less declaration, skipped); its length runs from
//! the line of `fn` to the line of the matching `}`, both counted.
//! Functions nested in functions are measured on their own as well, and
//! inside their parent. `fn(..)` pointer types have no name and are not
//! functions; neither is anything a macro generates.

use crate::lexer::{self, head_end, ident_at, line_of_index, matching_brace, skip_space, word_at};

/// One function's place in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnSpan {
    /// Its name.
    pub name: String,
    /// Line (1-based) of the keyword `fn`.
    pub first_line: usize,
    /// Line of the closing brace.
    pub last_line: usize,
}

impl FnSpan {
    /// Lines from `fn` to the closing brace, both counted.
    pub fn lines(&self) -> usize {
        self.last_line - self.first_line + 1
    }
}

/// Every function with a body in `src`.
pub fn function_spans(src: &str) -> Vec<FnSpan> {
    let chars: Vec<char> = lexer::blank(src).chars().collect();
    let line = line_of_index(&chars);
    let mut spans = Vec::new();
    for i in 0..chars.len() {
        if chars[i] != 'f' || !word_at(&chars, i, "fn") {
            continue;
        }
        let name = ident_at(&chars, skip_space(&chars, i + 2));
        if name.is_empty() {
            continue;
        }
        let Some(head) = head_end(&chars, i + 2) else {
            continue;
        };
        if chars[head] != '{' {
            continue;
        }
        if let Some(close) = matching_brace(&chars, head) {
            spans.push(FnSpan {
                name,
                first_line: line[i],
                last_line: line[close],
            });
        }
    }
    spans
}

#[test]
fn planted_long_function_is_measured() {
    let mut src = String::from("/// fn not_me() {}\nfn short() -> [u8; 2] { [0, 1] }\n");
    src.push_str(
        "pub(crate) fn long<T: Fn(u8) -> u8>(f: fn(u8) -> u8) -> u8\nwhere\n    T: Copy,\n{\n",
    );
    for n in 0..40 {
        src.push_str(&format!("    let _x{n} = \"}}\";\n"));
    }
    src.push_str("    fn inner() {}\n    0\n}\ntrait T { fn decl(&self); }\n");
    let spans = function_spans(&src);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["short", "long", "inner"]);
    assert_eq!(spans[0].lines(), 1);
    assert_eq!((spans[1].first_line, spans[1].last_line), (3, 49));
    assert_eq!(spans[1].lines(), 47);
}
