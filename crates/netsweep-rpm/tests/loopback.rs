//! The client against the crate's own server on loopback, with an admission that refuses
//! connections: a load-generating connection the server refuses is replaced, and the result
//! says how many failed. (Against `netsweep serve --rpm`, nginx and the lab: tests/serve/rpm.rs
//! and tests/lab/rpm_lab.rs.)

use netsweep_model::rpm::Params;
use netsweep_rpm::client::{self, Options};
use netsweep_rpm::server::{self, Admitted, ServerOptions};
use netsweep_transport::tls::{identity, trust};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn load_connections_the_server_refuses_are_replaced_and_counted() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // The document's connection and the ten idle probes' are served; the next two are
    // refused (503 with the reason): the first load-generating connection and the first
    // foreign probe, which the direction opens at once.
    let seen = Arc::new(AtomicUsize::new(0));
    let admit = {
        let seen = seen.clone();
        Arc::new(move |_| {
            let n = seen.fetch_add(1, Ordering::Relaxed);
            if (11..=12).contains(&n) {
                Err("refused by the test".to_string())
            } else {
                Ok(Box::new(()) as Admitted)
            }
        })
    };
    let stop = Arc::new(AtomicBool::new(false));
    let opts = ServerOptions {
        tls: identity::server().unwrap().config.clone(),
        max_connection: Duration::from_secs(30),
        handshake_timeout: Duration::from_secs(5),
        admit,
    };
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || server::serve(listener, opts, stop))
    };
    let params = Params {
        interval_ms: 200,
        max_intervals: 12,
        ..Params::default()
    };
    let r = client::run(
        &addr.to_string(),
        &Options {
            params,
            tls: trust::client_config(&trust::Trust::Insecure).unwrap(),
            trust: "insecure".into(),
            timeout: Duration::from_secs(5),
            progress: false,
            download: true,
            upload: false,
        },
    );
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap().unwrap();
    let r = r.unwrap();
    let d = &r.directions[0];
    assert!(
        d.connections_failed > 0 && !d.load_errors.is_empty(),
        "some load connections were refused: {d:?}"
    );
    assert!(
        d.load_errors
            .iter()
            .all(|e| e.contains("refused by the test")),
        "{:?}",
        d.load_errors
    );
    // Each failure was replaced: the ramp's count is what it asked for, not less.
    let last = d.intervals.last().unwrap();
    assert_eq!(last.connections, d.connections, "{d:?}");
    assert!(d.connections >= 2, "{d:?}");
    assert!(d.bytes > 0 && d.goodput_bps > 0.0, "{d:?}");
}
