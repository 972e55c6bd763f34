//! Headless Chromium driven through the DevTools protocol over a pipe
//! (`--remote-debugging-pipe`: the browser reads commands on its fd 3 and
//! writes answers on fd 4, each a JSON text ended by a NUL byte), for the
//! dashboard's real-browser tests (`tests/dashboard.rs`).
//!
//! The two descriptors are named pipes the shell that starts the browser
//! opens as 3 and 4; no WebSocket, no crate. Every wait is bounded: the
//! start ([`START_TIMEOUT`]) and each command's answer ([`CALL_TIMEOUT`]).
//! Dropping the browser kills it.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Bound on the browser opening its pipes.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one command's answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The screenshots' scale of the page's CSS pixels.
pub const SHOT_SCALE: f64 = 0.75;
/// Messages the reader skips while waiting for one answer (events).
const EVENTS_SKIPPED_MAX: usize = 100_000;

/// The browser's program: Debian's `chromium` package (`.ci/run`
/// installs it). A test that needs it fails, naming it, when it is missing.
pub fn program() -> String {
    let found = Command::new("sh")
        .args(["-c", "command -v chromium"])
        .output()
        .expect("run sh");
    assert!(
        found.status.success(),
        "the dashboard tests need Debian's chromium (apt-get install -y chromium; .ci/run installs it)"
    );
    String::from_utf8_lossy(&found.stdout).trim().to_owned()
}

/// A headless browser with one page.
pub struct Browser {
    child: Child,
    to: std::fs::File,
    from: Receiver<Value>,
    next_id: u64,
    session: String,
    _dir: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Browser {
    /// Starts the browser with a page of `width` by `height` CSS pixels;
    /// `extra` are further command-line switches.
    pub fn start(width: u32, height: u32, extra: &[&str]) -> Browser {
        let program = program();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (to_path, from_path) = (dir.path().join("to"), dir.path().join("from"));
        for p in [&to_path, &from_path] {
            let ok = Command::new("mkfifo").arg(p).status().expect("run mkfifo");
            assert!(ok.success(), "mkfifo {}", p.display());
        }
        let profile = dir.path().join("profile");
        let mut script =
            String::from("exec \"$0\" --headless --no-sandbox --disable-gpu --no-first-run");
        script.push_str(" --remote-debugging-pipe --user-data-dir=\"$3\" --window-size=\"$4\"");
        for (i, _) in extra.iter().enumerate() {
            script.push_str(&format!(" \"${}\"", i + 5));
        }
        script.push_str(" about:blank 3<\"$1\" 4>\"$2\"");
        let size = format!("{width},{height}");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg(&program)
            .arg(&to_path)
            .arg(&from_path)
            .arg(&profile)
            .arg(&size)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let (to, from) = match open_pipes(&to_path, &from_path) {
            Ok(pipes) => pipes,
            Err(e) => {
                let _ = child.kill();
                panic!("chromium did not open its pipes: {e}");
            }
        };
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from);
            loop {
                let mut message = Vec::new();
                match reader.read_until(0, &mut message) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                message.pop();
                let Ok(value) = serde_json::from_slice(&message) else {
                    continue;
                };
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let mut browser = Browser {
            child,
            to,
            from: rx,
            next_id: 0,
            session: String::new(),
            _dir: dir,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}), false);
        let target_id = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
            false,
        );
        browser.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_owned();
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            true,
        );
        browser
    }

    /// Sends `method` (to the page when `page`) and returns its result;
    /// an error answer or no answer in time panics.
    pub fn call(&mut self, method: &str, params: Value, page: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if page {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("JSON");
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to chromium");
        let deadline = Instant::now() + CALL_TIMEOUT;
        for _ in 0..EVENTS_SKIPPED_MAX {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = match self.from.recv_timeout(left) {
                Ok(answer) => answer,
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer in {CALL_TIMEOUT:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: chromium exited"),
            };
            if answer["id"] == json!(id) {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
        panic!("{method}: no answer among {EVENTS_SKIPPED_MAX} messages");
    }

    /// Loads `url` in the page (the load itself is waited for by the
    /// caller's checks on the page).
    pub fn navigate(&mut self, url: &str) {
        if let Err(error) = self.try_navigate(url) {
            panic!("navigate to {url}: {error}");
        }
    }

    /// Loads `url` in the page: `Err` with the browser's reason when it
    /// could not (`net::ERR_CERT_AUTHORITY_INVALID` …).
    pub fn try_navigate(&mut self, url: &str) -> Result<(), String> {
        let result = self.call("Page.navigate", json!({"url": url}), true);
        match result.get("errorText") {
            Some(error) => Err(error.as_str().unwrap_or_default().to_owned()),
            None => Ok(()),
        }
    }

    /// The value of `expression` evaluated in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            true,
        );
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Saves a PNG of the whole page at `path`, its CSS pixels times
    /// [`SHOT_SCALE`] (the docs' screenshots stay small).
    pub fn screenshot(&mut self, path: &Path) {
        let metrics = self.call("Page.getLayoutMetrics", json!({}), true);
        let size = &metrics["cssContentSize"];
        let (width, height) = (size["width"].as_f64(), size["height"].as_f64());
        let (width, height) = (width.expect("page width"), height.expect("page height"));
        let clip = json!({"x": 0, "y": 0, "width": width, "height": height, "scale": SHOT_SCALE});
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true, "clip": clip}),
            true,
        );
        let data = shot["data"].as_str().expect("screenshot data");
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create the screenshot's directory");
        }
        std::fs::write(path, base64_decode(data)).expect("write the screenshot");
    }
}

/// Opens the command pipe for writing, then the answer pipe for reading,
/// in the order the shell opens them (each open waits for the other end),
/// within [`START_TIMEOUT`].
fn open_pipes(to: &Path, from: &Path) -> Result<(std::fs::File, std::fs::File), String> {
    let (to, from) = (to.to_owned(), from.to_owned());
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .open(&to)
            .and_then(|t| std::fs::File::open(&from).map(|f| (t, f)));
        let _ = tx.send(opened);
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(pipes)) => Ok(pipes),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("not within {START_TIMEOUT:?}")),
    }
}

/// Bytes to standard base64 (RFC 4648, with padding).
pub fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 (RFC 4648, with padding) to bytes.
fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET
            .iter()
            .position(|&a| a == c)
            .expect("a base64 character") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[test]
fn base64_decodes_the_rfc_examples() {
    assert_eq!(base64_decode("Zm9vYmFy"), b"foobar");
    assert_eq!(base64_decode("Zm9vYg=="), b"foob");
    assert_eq!(base64_decode("Zm8="), b"fo");
    for (text, bytes) in [
        ("Zm9vYmFy", "foobar"),
        ("Zm9vYg==", "foob"),
        ("Zm8=", "fo"),
        ("", ""),
    ] {
        assert_eq!(base64_encode(bytes.as_bytes()), text);
    }
}
