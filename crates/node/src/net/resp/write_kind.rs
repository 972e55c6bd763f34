//! Which RESP commands are writes, for the connection's ordering rule
//! (`net::conn::resp_side`): a command that is not a write waits while
//! the connection's earlier writes are not answered, so a read sees them;
//! writes in a row still reach the engine in one hand-off. Pure.

use super::table::KeyOp;
use std::borrow::Cow;

/// True for the key operations that write (a pending one makes a later
/// read on the connection wait for it).
pub(crate) fn is_write(op: KeyOp) -> bool {
    matches!(
        op,
        KeyOp::Set | KeyOp::SetExpiring(_) | KeyOp::MSet | KeyOp::Del | KeyOp::Chained
    )
}

/// True for commands that only write keys (they need not wait for
/// earlier writes: the clock orders them). `SET … KEEPTTL` reads first,
/// and so does `SET … NX|XX|GET` (an atomic read-modify-write: it must
/// see this connection's earlier writes).
///
/// Runs before the command table checks the arity, so it reads `args`
/// only through `get` (a `SET k` behind a pending write once panicked
/// here slicing `args[3..]`); a short command is not a write, waits, and
/// gets its arity error from the table.
pub(crate) fn names_a_write(args: &[Cow<'_, [u8]>]) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    let options = args.get(3..).unwrap_or_default();
    [&b"set"[..], b"mset", b"setex", b"psetex"]
        .iter()
        .any(|w| name.eq_ignore_ascii_case(w))
        && !(name.eq_ignore_ascii_case(b"set")
            && options.iter().any(|a| {
                [&b"keepttl"[..], b"nx", b"xx", b"get"]
                    .iter()
                    .any(|o| a.eq_ignore_ascii_case(o))
            }))
}

#[cfg(test)]
mod tests {
    use super::names_a_write;

    use crate::net::resp::test_args as args;

    // `SET k` (and every other short write) behind a pending write once
    // sliced `args[3..]` and panicked: a short command is not a write.
    #[test]
    fn names_a_write_of_a_short_set_is_false_not_a_panic() {
        // Named a write whatever the arity (the table answers the arity).
        for words in [
            &["SET"][..],
            &["SET", "k"],
            &["set", "k", "v"],
            &["MSET"],
            &["SETEX", "k"],
        ] {
            assert!(names_a_write(&args(words)), "{words:?}");
        }
        assert!(!names_a_write(&args(&[])));
        assert!(!names_a_write(&args(&["SET", "k", "v", "KEEPTTL"])));
        assert!(names_a_write(&args(&["SET", "k", "v", "EX", "10"])));
        assert!(!names_a_write(&args(&["SET", "k", "v", "nx"])));
        assert!(!names_a_write(&args(&["INCR", "k"])));
        assert!(!names_a_write(&args(&["GET", "k", "v", "w"])));
    }
}
