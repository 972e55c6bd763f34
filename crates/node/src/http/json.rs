//! JSON helpers for the documents the node renders by hand
//! (`/v0/cluster`, `/v0/repair`): a few fixed shapes, no JSON library.

use std::fmt::Write;

/// Appends `s` as a JSON string.
pub fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
