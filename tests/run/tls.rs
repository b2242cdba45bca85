//! `-t tls` through the real binary: pingpong and stream on loopback with the handshake's
//! terms recorded on both sides; `serve --tls-cert/--tls-key` with a certificate openssl
//! made, whose fingerprint (as openssl computes it) the startup line prints and
//! `run --tls-pin` holds the server to; a wrong pin, a pin on another transport and a key
//! that is not the certificate's are refused by name.

use crate::common::*;
use netsweep_testkit::exe::serve::Server;
use serde_json::Value;

fn tls_of<'a>(v: &'a Value, side: &str) -> &'a Value {
    &v["granted"][side]["tls"]
}

#[test]
fn tls_pingpong_and_stream_record_what_the_handshake_agreed() {
    let dir = scratch("tls-loopback");
    for (pattern, sizes) in [("pingpong", "1,60k"), ("stream", "1k,1m")] {
        let (o, v) = run_json(
            &dir.join(format!("{pattern}.json")),
            &["-t", "tls", "-p", pattern, "--sizes", sizes],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(v["status"], "complete", "{}", v["message"]);
        assert_eq!(v["spec"]["transport"], "tls");
        let (c, s) = (tls_of(&v, "client"), tls_of(&v, "server"));
        for t in [c, s] {
            assert_eq!(t["version"], "TLSv1.3", "{t}");
            assert_eq!(t["key_exchange"], "X25519", "{t}");
            assert!(
                t["cipher_suite"].as_str().unwrap().starts_with("TLS13_"),
                "{t}"
            );
            assert!(t["kernel_tls"].as_str().unwrap().contains("kernel"), "{t}");
        }
        assert_eq!(c["cipher_suite"], s["cipher_suite"]);
        assert_eq!(
            c["certificate"], s["certificate"],
            "the client saw the certificate the server presented"
        );
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        for p in points {
            if pattern == "stream" {
                let sent = p["client"]["bytes_sent"].as_u64().unwrap();
                assert!(sent > 0 && sent == p["server"]["bytes_received"].as_u64().unwrap());
            } else {
                assert!(p["latency"]["half_rtt_ns"]["p50"].as_f64().unwrap() > 0.0);
            }
        }
    }
}

/// A self-signed certificate and key made by openssl, and openssl's SHA-256 fingerprint of
/// it (`AB:CD:…`).
fn openssl_identity(dir: &std::path::Path, name: &str) -> (String, String, String) {
    let (cert, key) = nginx::self_signed(dir, name);
    let fp = nginx::fingerprint(&cert);
    (
        cert.to_str().unwrap().into(),
        key.to_str().unwrap().into(),
        fp,
    )
}

#[test]
#[ignore = "needs openssl (Debian package openssl): ./run-tests installs it and runs this"]
fn serve_presents_the_certificate_it_is_given_and_run_holds_it_to_the_pin() {
    require_tool(
        "serve_presents_the_certificate_it_is_given",
        "openssl",
        "openssl",
    );
    let dir = scratch("tls-serve");
    let (cert, key, fp) = openssl_identity(&dir, "a");
    let srv = Server::start(&["--tls-cert", &cert, "--tls-key", &key]);
    let first = srv.log_first_line();
    assert!(
        first.contains(&format!("tls certificate sha256 {fp} ({cert})")),
        "the startup line prints openssl's fingerprint {fp}: {first}"
    );
    // The pin as a user may paste it: lower case, no colons.
    let pin = fp.replace(':', "").to_ascii_lowercase();
    let out = dir.join("pinned.json");
    let mut args = vec![
        "run",
        &srv.addr,
        "--no-save",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["-t", "tls", "--sizes", "1", "--tls-pin", &pin]);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(tls_of(&v, "client")["certificate"], fp.as_str());
    assert_eq!(tls_of(&v, "server")["certificate"], fp.as_str());

    // One hex digit off: refused before any data path opens (exit 1, naming both); a pin
    // with no TLS to check, and one that is not a fingerprint: usage errors (exit 2).
    let last = if pin.ends_with('0') { "1" } else { "0" };
    let wrong = format!("{}{last}", &pin[..63]);
    let announced = format!("announced TLS certificate {fp}");
    for (transport, pin, code, needle) in [
        ("tls", wrong.as_str(), 1, announced.as_str()),
        ("tcp", pin.as_str(), 2, "-t tls"),
        ("tls", "abcd", 2, "SHA-256"),
    ] {
        let o = run(&[
            "run",
            &srv.addr,
            "--no-save",
            "-q",
            "--sizes",
            "1",
            "-t",
            transport,
            "--tls-pin",
            pin,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(code),
            "-t {transport} --tls-pin {pin}: {err}"
        );
        assert!(
            err.contains(needle),
            "-t {transport} --tls-pin {pin}: {err}"
        );
    }
}

#[test]
#[ignore = "needs openssl (Debian package openssl): ./run-tests installs it and runs this"]
fn serve_refuses_a_key_that_is_not_the_certificates() {
    require_tool("serve_refuses_a_key", "openssl", "openssl");
    let dir = scratch("tls-mismatch");
    let (cert, _, _) = openssl_identity(&dir, "a");
    let (_, other_key, _) = openssl_identity(&dir, "b");
    let o = run(&[
        "serve",
        "--port",
        "0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &other_key,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("do not make a TLS identity"), "{err}");
    let o = run(&["serve", "--port", "0", "--tls-cert", &cert]);
    assert_eq!(o.status.code(), Some(2), "--tls-cert needs --tls-key");
}
