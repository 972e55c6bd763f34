//! Fuzzes the peer handshake's decoders and checks (`crates/node/src/auth/peer_proof.rs`, `peer/auth_gate.rs`, `peer/auth_dialer.rs`):
//! what a node reads from a peer it has not authenticated yet.
//!
//! Three readings of the input, none of which may panic:
//! - as the `Authorization` value of an upgrade request, checked against a
//!   fixed secret and challenge (`peer::auth_gate::decide`): a proof the fuzzer
//!   did not get from the secret is never accepted;
//! - as the server's answer to a dialer in both of its states (waiting for
//!   the challenge, waiting for the 101 and its proof): a 101 is never
//!   accepted unless it carries the server's proof;
//! - as header parameters: those that decode re-encode to a list that
//!   decodes to the same parameters.
#![no_main]

use ataman_node::peer::auth_dialer::{Dialer, Step};
use ataman_node::peer::auth_gate::{Gate, decide};
use ataman_node::auth::peer_proof::{self, Params};
use ataman_node::auth::secret::ClusterSecret;
use ataman_node::peer::handshake::PEER_PROTOCOL;

const SERVER_NONCE: [u8; 32] = [7; 32];
const CLIENT_NONCE: [u8; 32] = [9; 32];

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some(secret) = ClusterSecret::from_bytes(b"the-fuzzed-cluster-secret") else {
        return;
    };
    let mut issued = Some(SERVER_NONCE);
    let gate = decide(Some(&secret), PEER_PROTOCOL, &mut issued, Some(data), [1; 32]);
    assert!(issued.is_none(), "a nonce served twice");
    if let Gate::Accepted(_) = gate {
        let params = Params::decode(data, Some(peer_proof::SCHEME)).expect("accepted undecodable");
        let client = peer_proof::nonce_of(&params).expect("accepted without a nonce");
        let expected = peer_proof::prove(
            &secret,
            peer_proof::Side::Client,
            PEER_PROTOCOL,
            &SERVER_NONCE,
            &client,
            &params,
        );
        assert_eq!(params.get("proof"), Some(peer_proof::hex(&expected).as_str()));
    }

    let mut dialer = Dialer::new(PEER_PROTOCOL, "h:1", "http://h:2", Some(secret.clone()));
    let _ = dialer.on_answer(data, &mut || Some(CLIENT_NONCE));
    // The dialer after a genuine challenge, fed the input as the 101.
    let challenge = format!(
        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: {}\r\nContent-Length: 0\r\n\r\n",
        peer_proof::challenge(&SERVER_NONCE)
    );
    let mut dialer = Dialer::new(PEER_PROTOCOL, "h:1", "http://h:2", Some(secret.clone()));
    if let Ok(Step::Send { .. }) = dialer.on_answer(challenge.as_bytes(), &mut || Some(CLIENT_NONCE))
        && let Ok(Step::Up { consumed }) = dialer.on_answer(data, &mut || None)
    {
        assert!(consumed <= data.len());
        let info = peer_proof::server_info(&secret, PEER_PROTOCOL, &SERVER_NONCE, &CLIENT_NONCE);
        let text = String::from_utf8_lossy(&data[..consumed]);
        let proof = info.rsplit("proof=").next().unwrap_or("");
        assert!(text.contains(proof), "a 101 without the server's proof was accepted");
    }

    if let Ok(params) = Params::decode(data, None) {
        let again = Params::decode(params.encode(None).as_bytes(), None);
        assert_eq!(again.as_ref(), Ok(&params));
    }
});
