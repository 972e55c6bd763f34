//! HTTP's rendering of an [`Answer`]: its status, headers and body, in one
//! place (docs/ARCHITECTURE.md, "Status codes: where each is decided").
//!
//! The HTTP request parser and the router report their refusals as an
//! [`HttpError`] carrying a status; [`from_http_error`] names it as an
//! answer, so every answer, theirs included, is rendered here.

use super::answer::{Answer, Awaited, Failure, Format};
use crate::http::Status;
use crate::http::request::HttpError;
use crate::http::response::{Extra, Persist, write_full, write_not_modified, write_text};

/// The body of a 404.
const NOT_FOUND_TEXT: &str = "not found";
/// The body of a 412.
const PRECONDITION_FAILED_TEXT: &str = "precondition failed: the key's current version is not \
     one If-Match names (or the key has no value), or is one If-None-Match names; nothing written";
/// `Retry-After` of a 503, seconds.
pub(crate) const RETRY_AFTER_SEC: u32 = 1;
/// `Content-Type` of a value.
const VALUE_TYPE: &str = "application/octet-stream";
/// `Content-Type` of a JSON document.
const JSON_TYPE: &str = "application/json";
/// `Content-Type` of the metrics page (Prometheus text format).
const METRICS_TYPE: &str = "text/plain; version=0.0.4";

/// The status an answer is given.
pub fn status(answer: &Answer) -> Status {
    match answer {
        Answer::Value(..)
        | Answer::ValueUntil(..)
        | Answer::Document(..)
        | Answer::Done(Awaited::Read | Awaited::ReadVersion) => Status::Ok,
        Answer::NotFound(_) => Status::NotFound,
        Answer::Done(Awaited::Put(_)) => Status::Created,
        Answer::Done(Awaited::Delete(_)) | Answer::Started(_) => Status::Accepted,
        Answer::Failed(failure, _) => failure_status(*failure),
        Answer::NotModified(_) => Status::NotModified,
        Answer::PreconditionFailed(_) => Status::PreconditionFailed,
    }
}

fn failure_status(failure: Failure) -> Status {
    match failure {
        Failure::Invalid => Status::BadRequest,
        Failure::Unauthenticated => Status::Unauthorized,
        Failure::Forbidden => Status::Forbidden,
        Failure::NotAllowed(_) => Status::MethodNotAllowed,
        Failure::TimedOut => Status::RequestTimeout,
        Failure::Conflict => Status::Conflict,
        Failure::NotImplemented => Status::NotImplemented,
        Failure::TooLarge => Status::PayloadTooLarge,
        Failure::TooLong => Status::UriTooLong,
        Failure::Unmet => Status::ExpectationFailed,
        Failure::HeadTooLarge => Status::HeaderFieldsTooLarge,
        Failure::Internal => Status::InternalError,
        Failure::Busy => Status::Unavailable,
        Failure::NotEnoughReplicas => Status::GatewayTimeout,
        Failure::DiskFull => Status::InsufficientStorage,
    }
}

/// The answer a parser's or the router's refusal gives; `allow` is the
/// `Allow` header of a 405 for the request's path. A status that is no
/// refusal (never reported) is rendered as a 400.
pub fn from_http_error(e: &HttpError, allow: &'static str) -> Answer {
    let failure = match e.status {
        Status::PreconditionFailed => return Answer::PreconditionFailed(None),
        Status::MethodNotAllowed => Failure::NotAllowed(allow),
        Status::Unauthorized => Failure::Unauthenticated,
        Status::Forbidden => Failure::Forbidden,
        Status::RequestTimeout => Failure::TimedOut,
        Status::Conflict => Failure::Conflict,
        Status::NotImplemented => Failure::NotImplemented,
        Status::PayloadTooLarge => Failure::TooLarge,
        Status::UriTooLong => Failure::TooLong,
        Status::ExpectationFailed => Failure::Unmet,
        Status::HeaderFieldsTooLarge => Failure::HeadTooLarge,
        Status::InternalError => Failure::Internal,
        Status::Unavailable => Failure::Busy,
        Status::GatewayTimeout => Failure::NotEnoughReplicas,
        Status::InsufficientStorage => Failure::DiskFull,
        _ => Failure::Invalid,
    };
    Answer::Failed(failure, e.message.clone())
}

/// Appends `answer` as an HTTP response to `out`; returns its status.
pub fn render(out: &mut Vec<u8>, answer: &Answer, persist: Persist) -> Status {
    let status = status(answer);
    let typed = |content_type| Extra {
        content_type: Some(content_type),
        ..Extra::default()
    };
    match answer {
        Answer::Value(value, ts) => {
            let extra = Extra {
                version: Some(*ts),
                etag: true,
                ..typed(VALUE_TYPE)
            };
            write_full(out, status, extra, persist, value)
        }
        Answer::ValueUntil(value, _) => write_full(out, status, typed(VALUE_TYPE), persist, value),
        Answer::NotFound(version) => {
            let extra = Extra {
                version: *version,
                ..Extra::default()
            };
            write_text(out, status, extra, persist, NOT_FOUND_TEXT)
        }
        Answer::Done(awaited) => {
            let extra = Extra {
                version: awaited.version(),
                // A put's new version is the key's representation now.
                etag: matches!(awaited, Awaited::Put(_)),
                ..Extra::default()
            };
            write_full(out, status, extra, persist, b"")
        }
        Answer::NotModified(ts) => write_not_modified(out, *ts, persist),
        Answer::PreconditionFailed(current) => {
            let extra = Extra {
                version: *current,
                etag: true,
                ..Extra::default()
            };
            write_text(out, status, extra, persist, PRECONDITION_FAILED_TEXT)
        }
        Answer::Document(Format::Line, text) => {
            write_text(out, status, Extra::default(), persist, text)
        }
        Answer::Document(Format::Json, text) | Answer::Started(text) => {
            write_full(out, status, typed(JSON_TYPE), persist, text.as_bytes())
        }
        Answer::Document(Format::Metrics, text) => {
            write_full(out, status, typed(METRICS_TYPE), persist, text.as_bytes())
        }
        Answer::Document(Format::Asset(asset), text) => {
            let extra = Extra {
                csp: Some(crate::ui::CSP),
                cache_control: Some(crate::ui::CACHE_CONTROL),
                ..typed(asset.content_type())
            };
            write_full(out, status, extra, persist, text.as_bytes())
        }
        Answer::Failed(failure, text) => {
            let extra = Extra {
                allow: match failure {
                    Failure::NotAllowed(allow) => Some(allow),
                    _ => None,
                },
                retry_after_sec: (*failure == Failure::Busy).then_some(RETRY_AFTER_SEC),
                www_authenticate: (*failure == Failure::Unauthenticated).then_some("Bearer"),
                ..Extra::default()
            };
            write_text(out, status, extra, persist, text)
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::answer;
    use crate::replication::coordinator::Decision;

    fn rendered(answer: &Answer) -> String {
        let mut out = Vec::new();
        render(&mut out, answer, Persist::Default);
        String::from_utf8(out).unwrap()
    }

    fn head_of(text: &str) -> &str {
        text.split("\r\n\r\n").next().unwrap()
    }

    #[test]
    fn each_outcome_has_its_status_and_headers() {
        let e = |status, message: &str| HttpError::keep(status, message);
        let cases: Vec<(Answer, &str, &[&str])> = vec![
            (
                from_http_error(&e(Status::BadRequest, "bad query"), ""),
                "400 Bad Request",
                &["Content-Type: text/plain"],
            ),
            (
                answer::read(Ok(None)),
                "404 Not Found",
                &["Content-Type: text/plain"],
            ),
            (
                from_http_error(&e(Status::MethodNotAllowed, "no"), "GET, PUT"),
                "405 Method Not Allowed",
                &["Allow: GET, PUT"],
            ),
            (
                from_http_error(&e(Status::PayloadTooLarge, "value too large"), ""),
                "413 Payload Too Large",
                &[],
            ),
            (
                from_http_error(&e(Status::UriTooLong, "key too long"), ""),
                "414 URI Too Long",
                &[],
            ),
            (
                answer::written(Awaited::Put(5), Err("queue full".into()), false, false),
                "503 Service Unavailable",
                &["Retry-After: 1"],
            ),
            (
                answer::decided(Awaited::Read, Ok(Decision::Failed("timeout".into()))),
                "504 Gateway Timeout",
                &[],
            ),
            (
                answer::written(Awaited::Put(5), Err("ENOSPC".into()), false, true),
                "507 Insufficient Storage",
                &[],
            ),
            (
                answer::decided(Awaited::Put(5), Ok(Decision::Written { ts: 6 })),
                "201 Created",
                &[
                    "Content-Length: 0",
                    "X-Ataman-Version: 6\r\n",
                    "ETag: \"6\"\r\n",
                ],
            ),
            (
                Answer::PreconditionFailed(Some(4)),
                "412 Precondition Failed",
                &[
                    "Content-Type: text/plain",
                    "X-Ataman-Version: 4\r\n",
                    "ETag: \"4\"\r\n",
                ],
            ),
            (
                Answer::PreconditionFailed(None),
                "412 Precondition Failed",
                &["Content-Type: text/plain"],
            ),
            (
                answer::written(Awaited::Delete(7), Ok(()), false, false),
                "202 Accepted",
                &["Content-Length: 0", "X-Ataman-Version: 7\r\n"],
            ),
            (
                Answer::Value(b"v".to_vec(), 8),
                "200 OK",
                &[
                    "Content-Type: application/octet-stream",
                    "X-Ataman-Version: 8\r\n",
                    "ETag: \"8\"\r\n",
                ],
            ),
            (
                answer::read(Ok(Some(ataman_engine::Entry {
                    ts: 9,
                    value: None,
                    deadline_ms: None,
                }))),
                "404 Not Found",
                &["X-Ataman-Version: 9\r\n"],
            ),
        ];
        for (answer, line, headers) in cases {
            let text = rendered(&answer);
            let head = head_of(&text);
            assert!(head.starts_with(&format!("HTTP/1.1 {line}\r\n")), "{head}");
            let lines = format!("{head}\r\n");
            for header in headers {
                assert!(lines.contains(header), "{header} missing: {head}");
            }
            let retry = head.contains("Retry-After");
            assert_eq!(retry, line.starts_with("503"), "{head}");
            // Only a value, a put's new version and a 412's current one
            // carry an ETag; a version only what names one.
            let tagged = headers.iter().any(|h| h.starts_with("ETag"));
            assert_eq!(head.contains("ETag"), tagged, "{head}");
            let versioned = headers.iter().any(|h| h.starts_with("X-Ataman-Version"));
            assert_eq!(head.contains("X-Ataman-Version"), versioned, "{head}");
        }
    }

    /// A 304 names the version (`ETag`, `X-Ataman-Version`) and has no
    /// body and no `Content-Length` (RFC 9110 15.4.5).
    #[test]
    fn not_modified_has_no_body() {
        let text = rendered(&Answer::NotModified(12));
        assert_eq!(
            text,
            "HTTP/1.1 304 Not Modified\r\nX-Ataman-Version: 12\r\nETag: \"12\"\r\n\r\n"
        );
        let mut out = Vec::new();
        let status = render(&mut out, &Answer::NotModified(1), Persist::Close);
        assert_eq!(status, Status::NotModified);
        assert!(
            String::from_utf8(out)
                .unwrap()
                .ends_with("Connection: close\r\n\r\n")
        );
    }

    #[test]
    fn failure_bodies_are_their_line_and_a_404_says_not_found() {
        let text = rendered(&answer::decided(Awaited::Read, Ok(Decision::Read(None))));
        assert!(text.ends_with("\r\n\r\nnot found\n"), "{text}");
        let text = rendered(&from_http_error(
            &HttpError::close(Status::UriTooLong, "key of 9 bytes over 8"),
            "",
        ));
        assert!(text.ends_with("\r\n\r\nkey of 9 bytes over 8\n"), "{text}");
    }

    #[test]
    fn every_refusal_status_survives_naming_it_as_an_answer() {
        // Every refusal the node can give (4xx and 5xx but 404, an answer
        // of its own, not a refusal).
        let refusals = crate::metrics::ALL_STATUSES
            .into_iter()
            .filter(|s| s.code() >= 400 && *s != Status::NotFound);
        for status in refusals {
            let answer = from_http_error(&HttpError::keep(status, "x"), "GET");
            assert_eq!(super::status(&answer), status);
        }
    }
}
