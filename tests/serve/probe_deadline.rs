//! Issue 41 items 6–7 and issue 39 item 7: a `/probe` fits its scrape by construction. The
//! exporter reads `X-Prometheus-Scrape-Timeout-Seconds` (10 s without), cuts the probe's point
//! to what is left after a margin, kills a run at the deadline, and answers
//! `netsweep_probe_success 0` with `netsweep_probe_failure_info{reason,message}` — HTTP 200,
//! within the timeout — when the probe could not fit, found the exporter busy, overran, missed
//! its minimum trials or the precision it asked for, or named a target that does not resolve.
//! A reverse stream's series say `direction="reverse"`.

use super::exporter::{exporter, get, get_with};
use crate::common::serve::Server;
use std::time::{Duration, Instant};

/// `/probe?{q}` with a scrape timeout of `secs`: (status, body, how long the answer took).
fn probe(addr: &str, q: &str, secs: f64) -> (u16, String, Duration) {
    let t0 = Instant::now();
    let h = format!("X-Prometheus-Scrape-Timeout-Seconds: {secs}\r\n");
    let (status, body) = get_with(addr, &format!("/probe?{q}"), &h);
    (status, body, t0.elapsed())
}

fn reason(body: &str) -> Option<String> {
    body.lines()
        .find_map(|l| l.strip_prefix("netsweep_probe_failure_info{reason=\""))
        .and_then(|r| r.split('"').next())
        .map(str::to_string)
}

#[test]
fn a_probe_fits_its_scrape_timeout_or_answers_zero_with_the_reason() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    let server = Server::start(&[]);
    let (_e, addr) = exporter(&["--max-probes", "1"]);
    // A 2 s point under a 1.5 s scrape: cut to fit, answered before the timeout.
    let (status, body, took) = probe(&addr, &format!("target={}&duration=2s", server.addr), 1.5);
    assert_eq!(status, 200, "{body}");
    assert!(took < Duration::from_millis(1500), "{took:?}\n{body}");
    assert!(
        body.contains("netsweep_probe_timeout_seconds 1.5\n"),
        "{body}"
    );
    let point: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix("netsweep_probe_point_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(point > 0.0 && point < 1.35, "{point}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    // Too short for any probe: said at once.
    let (status, body, took) = probe(&addr, &format!("target={}", server.addr), 0.3);
    assert_eq!(status, 200);
    assert!(took < Duration::from_millis(300), "{took:?}");
    assert!(body.contains("netsweep_probe_success 0\n"), "{body}");
    assert_eq!(
        reason(&body).as_deref(),
        Some("timeout_too_short"),
        "{body}"
    );
    // Fewer trials than asked within the point: 0, the run's series kept.
    let q = format!(
        "target={}&pattern=stream&duration=100ms&min_trials=30",
        server.addr
    );
    let (_, body, _) = probe(&addr, &q, 3.0);
    assert_eq!(reason(&body).as_deref(), Some("min_trials"), "{body}");
    assert!(body.contains("netsweep_trials{"), "{body}");
    // A precision the point cannot reach in 100 ms.
    let q = format!(
        "target={}&pattern=stream&duration=100ms&min_trials=2&precision=0.1%25",
        server.addr
    );
    let (_, body, _) = probe(&addr, &q, 3.0);
    assert_eq!(reason(&body).as_deref(), Some("precision"), "{body}");
    // An unresolvable target: the resolver's words in the answer, not only on stderr.
    let (status, body, _) = probe(&addr, "target=no-such-host.invalid", 3.0);
    assert_eq!(status, 200);
    assert_eq!(reason(&body).as_deref(), Some("unresolvable"), "{body}");
    assert!(body.contains("cannot resolve"), "{body}");
    // A reverse stream is labelled apart from a forward one.
    let q = format!(
        "target={}&pattern=stream&reverse=true&duration=200ms&min_trials=2",
        server.addr
    );
    let (_, body, _) = probe(&addr, &q, 3.0);
    assert!(body.contains("direction=\"reverse\""), "{body}");
    // Busy (--max-probes 1): 0 with the reason, not a 503 Prometheus shows as the target down.
    let long = format!("/probe?target={}&duration=2s&pattern=pingpong", server.addr);
    let (a2, l2) = (addr.clone(), long.clone());
    let first = std::thread::spawn(move || get(&a2, &l2));
    std::thread::sleep(Duration::from_millis(300));
    let (status, body, _) = probe(
        &addr,
        &format!("target={}&duration=100ms", server.addr),
        3.0,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(reason(&body).as_deref(), Some("busy"), "{body}");
    assert_eq!(first.join().unwrap().0, 200);
}

#[test]
fn a_peer_that_never_answers_is_a_zero_before_the_scrape_times_out() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    // Accepts and says nothing: the run waits for its peer until the exporter's deadline.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = silent.local_addr().unwrap();
    let hold = std::thread::spawn(move || {
        let c = silent.accept();
        std::thread::sleep(Duration::from_secs(3));
        drop(c);
    });
    let (_e, addr) = exporter(&[]);
    let (status, body, took) = probe(&addr, &format!("target={at}&duration=100ms"), 1.0);
    assert_eq!(status, 200, "{body}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(body.contains("netsweep_probe_success 0\n"), "{body}");
    let r = reason(&body);
    assert!(
        matches!(r.as_deref(), Some("deadline" | "run_failed")),
        "{r:?}: {body}"
    );
    let _ = hold.join();
}

#[test]
fn probes_that_overlap_say_so() {
    let _beside = netsweep_testkit::lab::beside_lab_tests();
    let server = Server::start(&[]);
    let (_e, addr) = exporter(&["--max-probes", "2"]);
    let q = |size: &str| {
        format!(
            "/probe?target={}&pattern=pingpong&size={size}&duration=1s",
            server.addr
        )
    };
    let (a, qa) = (addr.clone(), q("1k"));
    let first = std::thread::spawn(move || get(&a, &qa));
    std::thread::sleep(Duration::from_millis(200));
    let (_, second) = get(&addr, &q("2k"));
    let (_, first) = first.join().unwrap();
    for body in [&first, &second] {
        assert!(
            body.contains("netsweep_probe_overlapping_probes 1\n"),
            "{body}"
        );
    }
    // Alone: none.
    let (_, alone) = get(&addr, &q("4k"));
    assert!(
        alone.contains("netsweep_probe_overlapping_probes 0\n"),
        "{alone}"
    );
}
