//! The example scenarios in `scenarios/` parse, lay out without errors, and say what their
//! names promise. No root needed.

use netsweep_lab::plan::plan;
use netsweep_lab::topology::{Protocol, ShaperKind};
use netsweep_lab::{Layout, Scenario};
use std::path::PathBuf;

fn load(name: &str) -> (Scenario, Layout) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let l = plan(&s.topology, "ex").unwrap_or_else(|e| panic!("{name}: {e}"));
    (s, l)
}

#[test]
fn every_example_parses() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for sub in ["", "seeds"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let name = format!("{sub}/{}", p.file_name().unwrap().to_str().unwrap());
                load(name.trim_start_matches('/'));
                n += 1;
            }
        }
    }
    assert!(
        n >= 11,
        "found {n} scenarios in {} and its seeds/",
        dir.display()
    );
}

#[test]
fn two_hosts() {
    let (s, l) = load("two-hosts.toml");
    assert_eq!(s.name, "two-hosts");
    assert_eq!(l.links.len(), 1);
    assert_eq!(l.links[0].mtu, 1500);
    assert!(s.runs.len() >= 2);
}

#[test]
fn routed() {
    let (s, l) = load("routed.toml");
    assert!(l.host("router").unwrap().router);
    assert!(!l.host("client").unwrap().routes.is_empty());
    assert!(s
        .runs
        .iter()
        .all(|r| r.client == "client" && r.server == "server"));
}

#[test]
fn vxlan() {
    let (s, l) = load("vxlan.toml");
    let vx = l.tunnel("vx").unwrap();
    assert_eq!(vx.mtu, 1450);
    assert_eq!(vx.path, ["client", "router", "server"]);
    assert_eq!(l.tunnel("vx1500").unwrap().mtu, 1500);
    let via: Vec<Option<&str>> = s.runs.iter().map(|r| r.via.as_deref()).collect();
    assert!(via.contains(&Some("direct")) && via.contains(&Some("vx")));
    assert!(s
        .runs
        .iter()
        .any(|r| r.args.iter().any(|a| a.contains("tcp")) && r.args.iter().any(|a| a == "stream")));
    assert!(s
        .runs
        .iter()
        .any(|r| r.args.iter().any(|a| a.starts_with("1200..1800"))));
    assert_eq!(s.figures.len(), 2);
}

#[test]
fn jumbo() {
    let (_, l) = load("jumbo.toml");
    assert_eq!(l.links[0].mtu, 9000);
}

#[test]
fn lossy() {
    let (s, l) = load("lossy.toml");
    let rule = &l.links[0].loss;
    assert_eq!(rule.len(), 1);
    assert_eq!(rule[0].probability, 0.01);
    assert_eq!(rule[0].protocol, Protocol::Udp);
    assert_eq!(
        (rule[0].from.as_str(), rule[0].to.as_str()),
        ("client", "server")
    );
    assert!(s.runs[0].args.contains(&"udp".to_string()));
}

#[test]
fn shaped() {
    let (s, l) = load("shaped.toml");
    let sh = &l.links[0].shapers;
    assert_eq!(sh.len(), 2, "both directions");
    assert_eq!(sh[0].kind, ShaperKind::Tbf);
    assert_eq!(sh[0].rate.bits_per_sec, 100_000_000);
    assert!(s.runs.iter().any(|r| r.args.contains(&"tcp".to_string())));
    assert!(s.runs.iter().any(|r| r.args.contains(&"udp".to_string())));
}

/// Seed 003 compares four paths — direct, routed through the redirector, and encapsulated by
/// it without and with path MTU discovery — under two bottlenecks; the routed one targets the
/// server's address behind the redirector, and the client reaches the no-PMTUD tunnel by a
/// route locked at its MTU.
#[test]
fn seed_003_has_its_paths_and_the_redirector_encapsulates_without_pmtud() {
    let (s, l) = load("seeds/003-redirector.toml");
    let names: Vec<&str> = s.design.cells.iter().map(|c| c.name.as_str()).collect();
    for path in ["direct", "routed", "encapsulated", "encapsulated-pmtud"] {
        for b in ["cpu", "rate"] {
            let n = format!("stream-{path}-{b}");
            assert!(names.contains(&n.as_str()), "{n} missing from {names:?}");
        }
    }
    for n in [
        "rr-encapsulated-cpu",
        "crr-direct-cpu",
        "crr-encapsulated-cpu",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let routed = s
        .runs
        .iter()
        .find(|r| r.name == "stream-routed-cpu-r1")
        .unwrap();
    assert_eq!(routed.via.as_deref(), Some("redirector-server"));
    let link = l
        .links
        .iter()
        .find(|k| k.name == "redirector-server")
        .unwrap();
    assert!(
        link.emulator.is_some(),
        "the relay carries the redirector's link"
    );
    let encap = l.tunnels.iter().find(|t| t.name == "encap").unwrap();
    assert_eq!(encap.path, ["redirector", "server"]);
    assert!(!encap.pmtu_discovery);
    let client = l.hosts.iter().find(|h| h.name == "client").unwrap();
    let into = client
        .routes
        .iter()
        .find(|r| r.dest == encap.subnet.to_string())
        .expect("a client route into the tunnel");
    assert_eq!(into.mtu_lock, Some(1500));
    assert_eq!(s.figures[0].series.as_deref(), Some("path"));
}
