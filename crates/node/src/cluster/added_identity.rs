//! Whether a node may be added under the URL a change names: what the
//! node says about itself on `GET /v0/status`, values in, a decision out.
//!
//! Pure: the proposer's I/O (`super::change_request::Reach`, over HTTP in
//! the node's `layout_io`) asks the URL and hands over what it heard
//! ([`Heard`]); the change request (`super::change_request`) asks
//! [`decide`] before any agreement round.
//!
//! # Why
//! A layout names a node by its URL, and the node learns that it was added
//! by finding its own URL (`--self`) in a committed layout. A URL that
//! reaches a node under another name adds a node that never learns it was
//! added: another member's second name (`http://localhost:P` for the member
//! `http://127.0.0.1:P`: one process in two replica slots with two node
//! ids), a joining node's second name, or a node of another cluster. Each
//! transition then waits for a node that will never copy, and a transition
//! cannot be cancelled (docs/CLUSTER.md, "A transition that cannot
//! finish"): the cluster takes no change any more. So the node must say
//! who it is before it is proposed.
//!
//! # Rules (in this order; each refusal is 400 naming the reason)
//! 1. **No answer** (no connection, no response within the call's bounds):
//!    refused, "does not answer". An `https` URL the proposer cannot
//!    dial over TLS (no `--tls-ca`) is not asked at all: refused, "has no
//!    --tls-ca" (never checked over plain HTTP).
//! 2. **Not a status answer** (a status other than 200, or a body neither
//!    `ok` nor the non-member document): refused, "is not an ataman node
//!    waiting to join".
//! 3. **A member** (`ok`: it serves clients as a member of a cluster, this
//!    one under another name or another one): refused.
//! 4. **Removed** (`"removed":true`): refused; a removed node is added
//!    again by starting it afresh (empty data directory, `--join`).
//! 5. **Not joining**, or names no URL (`"self"` absent: a version from
//!    before identities): refused.
//! 6. **Another name**: the URL it names itself by (`"self"`, its
//!    `--self`) is not exactly the URL added: refused, naming it (and
//!    saying so when it is a member's URL).
//! 7. **Another cluster**: the members it knows (`"members"`, the layout
//!    its seed gave it) share no URL with this cluster's current members:
//!    refused, naming both lists.
//! 8. Otherwise it may be added.
//!
//! The old rule, kept as a planted bug ([`Mode::PlantedStatusOnly`],
//! `--debug-planted-bug add-checks-only-status`): any 200 on
//! `GET /v0/status` admits the URL.

use serde::Deserialize;

/// What the proposer heard from the URL it is asked to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// No answer, and why (connect, TLS, timeout).
    Nothing(String),
    /// Not asked: the URL is `https` and the proposer has no `--tls-ca`
    /// to check it over TLS with.
    NoTlsCa,
    /// An answer to `GET /v0/status`: its status code and body.
    Status {
        /// The status code.
        code: u16,
        /// The body, whole.
        body: Vec<u8>,
    },
}

/// Which rule decides (the sound one, or a planted mistake for the tests'
/// negative controls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// The rules of the module header.
    #[default]
    Sound,
    /// The old rule: any 200 on `GET /v0/status` admits the URL.
    PlantedStatusOnly,
}

/// Why an added URL is refused (the messages of docs/API.md, "Layout").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Rule 1.
    #[error("the added node {url} does not answer: {why}")]
    NoAnswer {
        /// The URL added.
        url: String,
        /// Why.
        why: String,
    },
    /// Rule 1: an `https` URL, and the proposer cannot dial TLS.
    #[error(
        "the added node {url} is an https URL and this node has no --tls-ca: it cannot check the node over TLS (start the proposing node with --tls-ca, or add the node by its http URL if it serves plain HTTP)"
    )]
    NoTlsCa {
        /// The URL added.
        url: String,
    },
    /// Rule 2.
    #[error(
        "the added node {url} is not an ataman node waiting to join: GET /v0/status answered {code} {body:?}"
    )]
    NotAStatus {
        /// The URL added.
        url: String,
        /// The status code it answered.
        code: u16,
        /// The start of its body.
        body: String,
    },
    /// Rule 3.
    #[error(
        "the added node {url} answers as a member of a cluster (this one under another name, or another cluster): add only a node started with --join, by the URL it was started with (--self)"
    )]
    Member {
        /// The URL added.
        url: String,
    },
    /// Rule 4.
    #[error(
        "the added node {url} was removed from a cluster: start it again with an empty data directory and --join to add it"
    )]
    Removed {
        /// The URL added.
        url: String,
    },
    /// Rule 5.
    #[error(
        "the added node {url} is not joining or does not say which URL it is (a version without node identities?): add only a node started with --join"
    )]
    NotJoining {
        /// The URL added.
        url: String,
    },
    /// Rule 6.
    #[error("{}", other_name(url, named, *member))]
    OtherName {
        /// The URL added.
        url: String,
        /// The URL the node names itself by.
        named: String,
        /// That URL is a member of this cluster.
        member: bool,
    },
    /// Rule 7.
    #[error(
        "the added node {url} is joining another cluster (it knows the members {theirs:?}, none of this cluster's {ours:?}): start it with --join naming a member of this cluster"
    )]
    OtherCluster {
        /// The URL added.
        url: String,
        /// The members it knows.
        theirs: Vec<String>,
        /// This cluster's current members.
        ours: Vec<String>,
    },
}

fn other_name(url: &str, named: &str, member: bool) -> String {
    match member {
        true => format!(
            "the added node {url} names itself {named}, a member of this cluster: one node cannot be added under a second name"
        ),
        false => format!(
            "the added node {url} names itself {named}: add it by that URL (a node is added by exactly the URL it was started with, --self)"
        ),
    }
}

/// Longest part of an unexpected body quoted in a refusal, bytes.
const QUOTED_BODY_BYTES_MAX: usize = 120;

/// The non-member document of `GET /v0/status` (docs/API.md,
/// "Membership"); unknown fields are ignored.
#[derive(Debug, Deserialize)]
struct StatusDocument {
    #[serde(default)]
    joining: bool,
    #[serde(default)]
    removed: bool,
    #[serde(default, rename = "self")]
    self_url: Option<String>,
    #[serde(default)]
    members: Vec<String>,
}

/// Decides whether `added` may be added to a cluster whose current
/// members are `members`, from what the node at `added` said (`heard`),
/// by `mode`'s rules.
pub fn decide(added: &str, heard: &Heard, members: &[String], mode: Mode) -> Result<(), Refusal> {
    let url = added.to_owned();
    let (code, body) = match heard {
        Heard::Nothing(why) => {
            return Err(Refusal::NoAnswer {
                url,
                why: why.clone(),
            });
        }
        Heard::NoTlsCa => return Err(Refusal::NoTlsCa { url }),
        Heard::Status { code, body } => (*code, body.as_slice()),
    };
    if mode == Mode::PlantedStatusOnly && code == 200 {
        return Ok(());
    }
    let not_a_status = || Refusal::NotAStatus {
        url: added.to_owned(),
        code,
        body: String::from_utf8_lossy(&body[..body.len().min(QUOTED_BODY_BYTES_MAX)]).into_owned(),
    };
    if code != 200 {
        return Err(not_a_status());
    }
    if body.trim_ascii() == b"ok" {
        return Err(Refusal::Member { url });
    }
    let doc: StatusDocument = serde_json::from_slice(body).map_err(|_| not_a_status())?;
    if doc.removed {
        return Err(Refusal::Removed { url });
    }
    let Some(named) = doc.self_url.filter(|_| doc.joining) else {
        return Err(Refusal::NotJoining { url });
    };
    if named != added {
        let member = members.contains(&named);
        return Err(Refusal::OtherName { url, named, member });
    }
    if !doc.members.iter().any(|m| members.contains(m)) {
        return Err(Refusal::OtherCluster {
            url,
            theirs: doc.members,
            ours: members.to_vec(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADDED: &str = "http://127.0.0.1:4";

    fn members() -> Vec<String> {
        (1..=3).map(|p| format!("http://127.0.0.1:{p}")).collect()
    }

    fn status(body: &str) -> Heard {
        Heard::Status {
            code: 200,
            body: body.as_bytes().to_vec(),
        }
    }

    /// What a node started with `--join` answers on `GET /v0/status`.
    fn joining(self_url: &str, members: &[&str]) -> Heard {
        let members: Vec<String> = members.iter().map(|m| format!("\"{m}\"")).collect();
        status(&format!(
            "{{\"self\":\"{self_url}\",\"member\":false,\"joining\":true,\"removed\":false,\
             \"safe_to_stop\":true,\"settled\":true,\"members\":[{}]}}",
            members.join(",")
        ))
    }

    fn sound(heard: &Heard) -> Result<(), Refusal> {
        decide(ADDED, heard, &members(), Mode::Sound)
    }

    /// Rule 8: a node joining this cluster, named by exactly its URL.
    #[test]
    fn a_joining_node_by_its_own_url_is_admitted() {
        let heard = joining(ADDED, &["http://127.0.0.1:1", "http://127.0.0.1:2"]);
        assert_eq!(sound(&heard), Ok(()));
        // It may know an older layout: one member in common is enough.
        let heard = joining(ADDED, &["http://127.0.0.1:3", "http://127.0.0.1:9"]);
        assert_eq!(sound(&heard), Ok(()));
    }

    /// Rule 3, the reported wedge: `http://localhost:P` reaches the member
    /// `http://127.0.0.1:P`, which answers `ok`; the old rule admitted it.
    #[test]
    fn a_member_under_another_name_is_refused() {
        let heard = status("ok\n");
        let refusal = decide("http://localhost:1", &heard, &members(), Mode::Sound);
        assert_eq!(
            refusal,
            Err(Refusal::Member {
                url: "http://localhost:1".into()
            })
        );
        assert!(
            refusal.unwrap_err().to_string().contains("as a member"),
            "the message names the reason"
        );
        // The old decision, planted: admitted.
        assert_eq!(
            decide(
                "http://localhost:1",
                &heard,
                &members(),
                Mode::PlantedStatusOnly
            ),
            Ok(())
        );
    }

    /// Rule 6: a joining node reached under another name, and a node
    /// that names itself by a member's URL.
    #[test]
    fn another_name_is_refused_naming_the_node_s_own() {
        let heard = joining("http://127.0.0.1:4", &["http://127.0.0.1:1"]);
        let got = decide("http://localhost:4", &heard, &members(), Mode::Sound);
        let Err(refusal @ Refusal::OtherName { member: false, .. }) = got else {
            panic!("{got:?}");
        };
        assert!(
            refusal
                .to_string()
                .contains("names itself http://127.0.0.1:4: add it by that URL"),
            "{refusal}"
        );
        let heard = joining("http://127.0.0.1:2", &["http://127.0.0.1:1"]);
        let got = sound(&heard);
        assert!(
            matches!(&got, Err(Refusal::OtherName { member: true, named, .. }) if named == "http://127.0.0.1:2"),
            "{got:?}"
        );
        // Exactly: no case folding, no trailing slash.
        for named in ["HTTP://127.0.0.1:4", "http://127.0.0.1:4/"] {
            let heard = joining(named, &["http://127.0.0.1:1"]);
            assert!(
                matches!(sound(&heard), Err(Refusal::OtherName { .. })),
                "{named}"
            );
        }
    }

    /// Rule 7: joining a cluster that shares no member with this one.
    #[test]
    fn a_node_joining_another_cluster_is_refused() {
        let heard = joining(ADDED, &["http://127.0.0.1:7", "http://127.0.0.1:8"]);
        let got = sound(&heard);
        assert!(
            matches!(&got, Err(Refusal::OtherCluster { theirs, .. }) if theirs.len() == 2),
            "{got:?}"
        );
        let heard = joining(ADDED, &[]);
        assert!(matches!(sound(&heard), Err(Refusal::OtherCluster { .. })));
    }

    /// Whether a refusal is the one a case expects.
    type IsExpected = fn(&Refusal) -> bool;

    /// Rules 1, 2, 4 and 5, each with its own refusal.
    #[test]
    fn every_other_answer_is_refused_with_its_reason() {
        let cases: [(Heard, IsExpected); 9] = [
            (Heard::NoTlsCa, |r| matches!(r, Refusal::NoTlsCa { .. })),
            (
                Heard::Nothing("connect: refused".into()),
                |r| matches!(r, Refusal::NoAnswer { why, .. } if why == "connect: refused"),
            ),
            (
                Heard::Status {
                    code: 503,
                    body: b"busy".to_vec(),
                },
                |r| matches!(r, Refusal::NotAStatus { code: 503, .. }),
            ),
            (status("<html>hello</html>"), |r| {
                matches!(r, Refusal::NotAStatus { code: 200, .. })
            }),
            (status("[1,2]"), |r| matches!(r, Refusal::NotAStatus { .. })),
            (
                status(
                    "{\"self\":\"http://127.0.0.1:4\",\"joining\":false,\"removed\":true,\"members\":[\"http://127.0.0.1:1\"]}",
                ),
                |r| matches!(r, Refusal::Removed { .. }),
            ),
            (
                status("{\"joining\":true,\"members\":[\"http://127.0.0.1:1\"]}"),
                |r| matches!(r, Refusal::NotJoining { .. }),
            ),
            (
                status(
                    "{\"self\":\"http://127.0.0.1:4\",\"joining\":false,\"members\":[\"http://127.0.0.1:1\"]}",
                ),
                |r| matches!(r, Refusal::NotJoining { .. }),
            ),
            (status("{\"self\":7}"), |r| {
                matches!(r, Refusal::NotAStatus { .. })
            }),
        ];
        for (heard, expected) in cases {
            let got = sound(&heard);
            assert!(got.as_ref().is_err_and(expected), "{heard:?}: {got:?}");
            assert!(
                got.unwrap_err().to_string().contains(ADDED),
                "the message names the URL"
            );
        }
    }

    /// A long unexpected body is quoted only up to the bound.
    #[test]
    fn a_long_body_is_quoted_up_to_the_bound() {
        let body = "x".repeat(QUOTED_BODY_BYTES_MAX + 50);
        let Err(Refusal::NotAStatus { body: quoted, .. }) = sound(&status(&body)) else {
            panic!("not refused as not a status");
        };
        assert_eq!(quoted.len(), QUOTED_BODY_BYTES_MAX);
    }
}
