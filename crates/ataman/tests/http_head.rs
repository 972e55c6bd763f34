//! Black-box tests of docs/API.md "HEAD": a HEAD is answered as the GET of
//! the same target without content (RFC 9110 9.3.2), errors included, so a
//! keep-alive client frames the next answer right. Against a real
//! `ataman serve` process, and with `curl -I`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use support::{IO_TIMEOUT, Node, entity, request};

/// One answer cut from a byte stream: status, headers (names lower-case)
/// and body.
#[derive(Debug)]
struct Cut {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Cut {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Cuts the answers to requests whose methods are `heads` (true: a HEAD,
/// whose answer has no content) from `stream`, in order; an error names
/// the first answer that does not frame, or bytes left over.
fn cut_answers(mut stream: &[u8], heads: &[bool]) -> Result<Vec<Cut>, String> {
    let mut cuts = Vec::new();
    for (n, &head_only) in heads.iter().enumerate() {
        let end = stream
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or(format!("answer {n}: no complete head"))?;
        let text = String::from_utf8_lossy(&stream[..end]).into_owned();
        stream = &stream[end + 4..];
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status = status_line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse().ok())
            .ok_or(format!("answer {n}: not a status line: {status_line:?}"))?;
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (name, value) = l.split_once(':').unwrap_or((l, ""));
                (name.to_ascii_lowercase(), value.trim().to_owned())
            })
            .collect();
        let mut cut = Cut {
            status,
            headers,
            body: Vec::new(),
        };
        if !head_only {
            if cut.header("transfer-encoding") == Some("chunked") {
                loop {
                    let line_end = stream
                        .windows(2)
                        .position(|w| w == b"\r\n")
                        .ok_or(format!("answer {n}: cut chunk size"))?;
                    let size = usize::from_str_radix(
                        std::str::from_utf8(&stream[..line_end]).unwrap_or("?"),
                        16,
                    )
                    .map_err(|e| format!("answer {n}: chunk size: {e}"))?;
                    let chunk = stream
                        .get(line_end + 2..line_end + 2 + size + 2)
                        .ok_or(format!("answer {n}: cut chunk"))?;
                    cut.body.extend_from_slice(&chunk[..size]);
                    stream = &stream[line_end + 2 + size + 2..];
                    if size == 0 {
                        break;
                    }
                }
            } else {
                let length: usize = cut
                    .header("content-length")
                    .and_then(|v| v.parse().ok())
                    .ok_or(format!("answer {n}: no Content-Length"))?;
                let body = stream
                    .get(..length)
                    .ok_or(format!("answer {n}: body cut short"))?;
                cut.body = body.to_vec();
                stream = &stream[length..];
            }
        }
        cuts.push(cut);
    }
    if !stream.is_empty() {
        return Err(format!(
            "{} bytes after the last answer: {:?}",
            stream.len(),
            String::from_utf8_lossy(stream)
        ));
    }
    Ok(cuts)
}

/// A request of the pipelined test: method, target, extra headers.
type Case<'a> = (&'a str, String, Vec<(&'a str, &'a str)>);

/// Sends `requests` pipelined in one write on one keep-alive connection,
/// ends the sending side, and returns every byte the node answered
/// until it closed.
fn pipelined(node: &Node, requests: &[Vec<u8>]) -> Vec<u8> {
    let mut stream = TcpStream::connect(node.addr()).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(&requests.concat()).unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    let mut answered = Vec::new();
    stream.read_to_end(&mut answered).unwrap();
    answered
}

// Proves pipelined HEADs (value, 404, 304, 400, 405, range, document) carry the GET's head, no body.
#[test]
fn pipelined_heads_frame_and_carry_the_gets_headers() {
    let node = Node::start(&[]);
    assert_eq!(node.put(b"k", b"hello").status, 201);
    let get = node.get(b"k");
    let etag = get.header_str("etag").unwrap();
    let cases: Vec<Case> = vec![
        ("HEAD", entity(b"k"), vec![]),
        ("GET", entity(b"k"), vec![]),
        ("HEAD", entity(b"absent"), vec![]),
        ("GET", entity(b"absent"), vec![]),
        ("HEAD", entity(b"k"), vec![("If-None-Match", etag.as_str())]),
        ("HEAD", "/v0/entity".into(), vec![]),
        ("HEAD", "/v0/internal/layout".into(), vec![]),
        ("HEAD", "/v0/entities?start=a".into(), vec![]),
        ("GET", "/v0/entities?start=a".into(), vec![]),
        ("HEAD", "/v0/status".into(), vec![]),
        ("GET", "/v0/status".into(), vec![]),
    ];
    let requests: Vec<Vec<u8>> = cases
        .iter()
        .map(|(method, target, headers)| request(method, target, headers, None))
        .collect();
    let heads: Vec<bool> = cases.iter().map(|(m, ..)| *m == "HEAD").collect();
    let answered = pipelined(&node, &requests);
    let cuts = cut_answers(&answered, &heads)
        .unwrap_or_else(|e| panic!("{e}\nall bytes: {:?}", String::from_utf8_lossy(&answered)));
    let statuses: Vec<u16> = cuts.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        [200, 200, 404, 404, 304, 400, 405, 200, 200, 200, 200]
    );
    // Each HEAD that has a GET behind it says exactly what the GET's head says.
    for at in [0, 2, 7, 9] {
        assert_eq!(cuts[at].headers, cuts[at + 1].headers, "answer {at}");
    }
    assert_eq!(cuts[0].header("content-length"), Some("5"));
    assert_eq!(cuts[0].header("etag"), Some(etag.as_str()));
    assert!(cuts[0].header("x-ataman-version").is_some());
    assert_eq!(cuts[1].body, b"hello");
    assert_eq!(cuts[4].header("etag"), Some(etag.as_str()));
    assert!(cuts[5].header("content-length").unwrap() != "0");
    assert_eq!(cuts[6].header("allow"), Some("POST"));
    assert_eq!(cuts[7].header("transfer-encoding"), Some("chunked"));
    assert_eq!(cuts[10].body, b"ok\n");
}

// Proves the framing check catches a HEAD answered with a body (negative control, hand-made).
#[test]
fn a_head_answered_with_a_body_does_not_frame() {
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let stream = [&answer[..], &answer[..]].concat();
    let err = cut_answers(&stream, &[true, false]).unwrap_err();
    assert!(err.contains("answer 1"), "{err}");
    // The same bytes frame as two GETs' answers.
    assert_eq!(cut_answers(&stream, &[false, false]).unwrap().len(), 2);
}

/// Runs `curl -sS -v -I` on `urls` (one connection, reused); returns
/// (stdout, stderr).
fn curl_head(urls: &[String]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sS", "-v", "-I", "--max-time", "10"])
        .args(urls)
        .output()
        .expect("curl (CI installs it)");
    assert!(out.status.success(), "curl: {out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Proves `curl -I` of three targets on one reused connection to a node finds no excess bytes.
#[test]
fn curl_head_finds_no_excess() {
    let node = Node::start(&[]);
    assert_eq!(node.put(b"k", b"hello").status, 201);
    let base = format!("http://{}", node.addr());
    let urls = [
        format!("{base}{}", entity(b"k")),
        format!("{base}{}", entity(b"absent")),
        format!("{base}/v0/internal/layout"),
    ];
    let (stdout, stderr) = curl_head(&urls);
    assert!(stderr.contains("Re-using existing connection"), "{stderr}");
    assert!(!stderr.contains("Excess"), "{stderr}");
    assert!(stdout.contains("HTTP/1.1 200 OK"), "{stdout}");
    assert!(stdout.contains("Content-Length: 5"), "{stdout}");
    assert!(stdout.contains("HTTP/1.1 404 Not Found"), "{stdout}");
    assert!(
        stdout.contains("HTTP/1.1 405 Method Not Allowed"),
        "{stdout}"
    );
}

// Proves curl reports "Excess" for a HEAD answered with a body (negative control, hand-made server).
#[test]
fn curl_reports_excess_for_a_bodied_head() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let (mut seen, mut answered, mut chunk) = (Vec::new(), 0, [0u8; 1024]);
        while answered < 2 {
            let n = sock.read(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&chunk[..n]);
            let heads = seen.windows(4).filter(|w| w == b"\r\n\r\n").count();
            while answered < heads {
                sock.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 3\r\n\r\nno\n")
                    .unwrap();
                answered += 1;
            }
        }
    });
    let urls = [format!("http://{addr}/a"), format!("http://{addr}/b")];
    let (_, stderr) = curl_head(&urls);
    server.join().unwrap();
    assert!(stderr.contains("Excess"), "{stderr}");
}
