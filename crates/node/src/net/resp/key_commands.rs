//! [`KeyCommands`]: the commands of a RESP [`super::table::Plan::Keys`],
//! one per key. Most commands name one key (`GET`, `SET`): that one is
//! held inline, so planning it allocates nothing; several (`MSET`, `DEL`,
//! `MGET`) are a `Vec`.

use crate::net::dispatch::Command;

/// A command's dispatcher commands, one per key (never none: the
/// planner makes at least one). Equal when their commands are, one
/// inline or not.
#[derive(Debug, Clone)]
pub enum KeyCommands<'a> {
    /// One key's command, inline.
    One(Command<'a>),
    /// Several keys' commands.
    Many(Vec<Command<'a>>),
}

impl<'a> KeyCommands<'a> {
    /// The commands as a slice, in order.
    pub fn as_slice(&self) -> &[Command<'a>] {
        match self {
            Self::One(c) => std::slice::from_ref(c),
            Self::Many(v) => v,
        }
    }
}

impl PartialEq for KeyCommands<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for KeyCommands<'_> {}

impl<'a> std::ops::Deref for KeyCommands<'a> {
    type Target = [Command<'a>];

    fn deref(&self) -> &Self::Target {
        self.as_slice()
    }
}

impl<'a> From<Vec<Command<'a>>> for KeyCommands<'a> {
    fn from(v: Vec<Command<'a>>) -> Self {
        Self::Many(v)
    }
}

/// The commands of a [`KeyCommands`], by value, in order.
pub enum IntoIter<'a> {
    /// What is left of [`KeyCommands::One`].
    One(Option<Command<'a>>),
    /// What is left of [`KeyCommands::Many`].
    Many(std::vec::IntoIter<Command<'a>>),
}

impl<'a> Iterator for IntoIter<'a> {
    type Item = Command<'a>;

    fn next(&mut self) -> Option<Command<'a>> {
        match self {
            Self::One(c) => c.take(),
            Self::Many(v) => v.next(),
        }
    }
}

impl<'a> IntoIterator for KeyCommands<'a> {
    type Item = Command<'a>;
    type IntoIter = IntoIter<'a>;

    fn into_iter(self) -> IntoIter<'a> {
        match self {
            Self::One(c) => IntoIter::One(Some(c)),
            Self::Many(v) => IntoIter::Many(v.into_iter()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(key: &[u8]) -> Command<'static> {
        Command::Get {
            key: key.to_vec().into(),
            ack: 1,
            from: 1,
        }
    }

    /// One command and many read back the same, by slice and by value,
    /// in order.
    #[test]
    fn one_and_many_read_alike() {
        let one = KeyCommands::One(get(b"a"));
        assert_eq!(one.as_slice(), &[get(b"a")]);
        assert_eq!(one.len(), 1);
        assert_eq!(one.clone().into_iter().collect::<Vec<_>>(), vec![get(b"a")]);
        assert_eq!(one, KeyCommands::from(vec![get(b"a")]));
        let many = KeyCommands::from(vec![get(b"a"), get(b"b")]);
        assert_ne!(one, many);
        assert_eq!(&many[1], &get(b"b"));
        assert_eq!(
            many.into_iter().collect::<Vec<_>>(),
            vec![get(b"a"), get(b"b")]
        );
    }
}
