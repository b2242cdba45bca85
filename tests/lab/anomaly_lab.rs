//! Issues 5 and 9: fine sweeps across a veth between two namespaces whose htb sends one band of
//! IP lengths through a 5 Mbit/s class (the rest at 200 Mbit/s) find that band as one dip at its
//! sizes — tcp and udp, pingpong and stream, both ends pinned and unpinned (unpinned, the
//! scheduler puts both sleeping ends on one CPU inside the band: placement flips *because of*
//! the chasm and must not hide it; and it flips beside the band too, 3–4× in RTT, which on
//! one host is placement, not a second anomaly), bands at two places — and a band running to
//! the end of the sweep as a cliff where it starts — on an idle machine; on a busy one the test
//! says it skipped that check; the report shades the dip it found on the plot. Needs root:
//! ignored without it, run by ./run-tests as root.

use crate::common::*;
use netsweep_lab::{Lab, Topology};
use netsweep_model::anomaly::{self, PathKind};
use netsweep_model::results;
use netsweep_testkit::lab::idle::{Busy, CpuWindow};
use netsweep_testkit::lab::{lock, require_labs, run_id};
use serde_json::Value;

/// A `rate` link whose IP lengths `lo..=hi` go through a 5 Mbit/s class.
fn banded(rate: &str, lo: u32, hi: u32) -> Topology {
    Topology::parse(&format!(
        r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
rate = "{rate}"
shape_band = {{ lo = {lo}, hi = {hi}, rate = "5mbit" }}
"#
    ))
    .unwrap()
}

/// One sweep in a lab and what it must find.
struct Case {
    name: &'static str,
    args: &'static [&'static str],
    /// (kind, first size, last size): the sizes whose packets fall in the band.
    want: (&'static str, u64, u64),
    /// Whether the report's plot of it must shade the dip.
    plotted: bool,
}

/// Builds the lab, runs every case against one server, tears the lab down, then checks.
fn sweep(tag: &str, rate: &str, lo: u32, hi: u32, cases: &[Case]) {
    let _l = lock().unwrap();
    let lab = Lab::up(&banded(rate, lo, hi), &run_id(tag)).unwrap();
    let addr = lab.address_for("client", "server").unwrap();
    let mut server = serve_in(&lab, "server", "0.0.0.0", 7200);
    let dir = scratch(tag);
    let mut runs = Vec::new();
    for c in cases {
        let out = dir.join(format!("{}.json", c.name));
        let cpu = CpuWindow::start();
        let began = std::time::Instant::now();
        let o = lab
            .command(
                "client",
                &[
                    bin(),
                    "run",
                    &format!("{addr}:7200"),
                    "--no-save",
                    "-q",
                    "-o",
                    out.to_str().unwrap(),
                    "--trial-time",
                    "20ms",
                    "--max-point-time",
                    "120ms",
                    // A stream point inside the band held to its budget: its trials are
                    // not lengthened to the 5 Mbit/s class's queue (~80 ms of lag), which
                    // took ~3 s a point there and still leaves it a dip.
                    "--hard-point-time",
                    "--timeout",
                    "5s",
                ],
            )
            .unwrap()
            .args(c.args)
            .output()
            .unwrap();
        eprintln!("{}: {:.1} s", c.name, began.elapsed().as_secs_f64());
        runs.push((o, out, cpu.finish()));
    }
    let _ = (server.kill(), server.wait());
    lab.down().unwrap();
    for (c, (o, out, busy)) in cases.iter().zip(&runs) {
        assert!(
            o.status.success(),
            "{}: {}",
            c.name,
            String::from_utf8_lossy(&o.stderr)
        );
        let text = std::fs::read_to_string(out).unwrap();
        let run = results::load(&text).unwrap();
        // The namespaces share this host's CPUs: both ends report its boot id.
        assert_eq!(anomaly::path_of(&run), PathKind::SameHost, "{}", c.name);
        assert!(!run.client.boot_id.is_empty());
        let v: Value = serde_json::from_str(&text).unwrap();
        check(c, &v, busy);
        if c.plotted {
            shaded_on_the_plot(c, out, &v);
        }
    }
}

/// The report's plot of a case that found a dip shades it (issue 9): the SVG marks the
/// anomaly's sizes.
fn shaded_on_the_plot(c: &Case, out: &std::path::Path, v: &Value) {
    let none = Vec::new();
    if !v["anomalies"]
        .as_array()
        .unwrap_or(&none)
        .iter()
        .any(|a| a["kind"] == "dip")
    {
        eprintln!(
            "{}: no dip found, so none to shade (see the check above)",
            c.name
        );
        return;
    }
    let svg_dir = out.with_extension("svg");
    let r = run(&[
        "report",
        out.to_str().unwrap(),
        "--svg",
        svg_dir.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let marked = std::fs::read_dir(&svg_dir)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .any(|s| s.contains(r#"class="anomaly""#));
    assert!(marked, "{}: a plot shades the dip", c.name);
}

/// On an idle machine: exactly one dip or cliff, of the wanted kind, its edges within one
/// 16-byte step of the band's. On a busy one the sweep itself is noisy (beside two busy loops
/// and a compile: unpinned pingpong edges 20–24 bytes off, and with three quarters of the CPUs
/// taken a band missed or split), so the check is skipped, saying what was found; the stored
/// anomalies must still be what detection finds in the stored points.
fn check(c: &Case, v: &Value, busy: &Busy) {
    let none = Vec::new();
    let found = v["anomalies"].as_array().unwrap_or(&none);
    let level: Vec<&Value> = found
        .iter()
        .filter(|a| a["kind"] == "dip" || a["kind"] == "cliff")
        .collect();
    let (kind, from, to) = c.want;
    let run = results::load(&v.to_string()).unwrap();
    let key = |a: &anomaly::Anomaly| (a.kind, a.from_size, a.to_size);
    assert_eq!(
        anomaly::detect_run(&run)
            .iter()
            .map(key)
            .collect::<Vec<_>>(),
        run.anomalies.iter().map(key).collect::<Vec<_>>(),
        "{}: the run stored what detection finds",
        c.name
    );
    if !busy.idle_enough() {
        let got: Vec<String> = level
            .iter()
            .map(|a| {
                format!(
                    "{} {}..{}",
                    a["kind"].as_str().unwrap_or("?"),
                    a["from_size"],
                    a["to_size"]
                )
            })
            .collect();
        eprintln!(
            "{}: SKIPPED the check for one {kind} at the band {from}..{to} (found {got:?}): the \
             machine was not idle: {busy}",
            c.name
        );
        return;
    }
    let table = points_table(v);
    assert_eq!(
        level.len(),
        1,
        "{}: exactly one {kind} (no cliff or dip elsewhere): {found:#?}\n{table}",
        c.name
    );
    let a = level[0];
    let (f, t) = (
        a["from_size"].as_u64().unwrap(),
        a["to_size"].as_u64().unwrap(),
    );
    assert_eq!(a["kind"], kind, "{}: {a:#?}", c.name);
    // Within one step of 16 bytes of the band's edges, or short of one by points inside
    // the band that were shaped only in part (the detector holds a dip's edge to half its
    // depth, so such a point is not its edge: tcp pinned once read 74 Mbit/s at 536 B
    // between 15 inside and 288 beyond; see `partly_shaped`).
    let near = |got: u64, edge: u64, inward: std::cmp::Ordering| {
        got.abs_diff(edge) <= 16 || (got.cmp(&edge) == inward && partly_shaped(v, got, edge))
    };
    assert!(
        near(f, from, std::cmp::Ordering::Greater) && near(t, to, std::cmp::Ordering::Less),
        "{}: {kind} {f}..{t} vs band {from}..{to} on an idle machine ({busy})\n{table}",
        c.name
    );
    // 5 Mbit/s against 100 or 200 Mbit/s line rate, or more for veth-fast pingpong.
    assert!(
        a["magnitude"].as_f64().unwrap() >= 0.8,
        "{}: {a:#?}",
        c.name
    );
}

/// Whether the points a dip's reported edge `got` leaves out of the band up to its edge
/// `edge` are at most one, and it was shaped in part: under half the median of the three
/// points beyond the band on that side, and above the dip's own level. A point there at the
/// outside's level (the detector cut the dip short of a fully unshaped point) is not.
fn partly_shaped(v: &Value, got: u64, edge: u64) -> bool {
    let none = Vec::new();
    let pts: Vec<(u64, f64)> = v["points"]
        .as_array()
        .unwrap_or(&none)
        .iter()
        .filter_map(|p| Some((p["size"].as_u64()?, p["throughput_mbps"]["mean"].as_f64()?)))
        .collect();
    let (lo, hi) = (got.min(edge), got.max(edge));
    let between: Vec<f64> = pts
        .iter()
        .filter(|(s, _)| *s > lo && *s < hi)
        .map(|p| p.1)
        .collect();
    let mut beyond: Vec<f64> = if got < edge {
        pts.iter()
            .filter(|(s, _)| *s > edge)
            .take(3)
            .map(|p| p.1)
            .collect()
    } else {
        pts.iter()
            .rev()
            .filter(|(s, _)| *s < edge)
            .take(3)
            .map(|p| p.1)
            .collect()
    };
    let inside = pts.iter().find(|(s, _)| *s == got).map(|p| p.1);
    beyond.sort_by(f64::total_cmp);
    let (Some(&outside), Some(inside), [one]) =
        (beyond.get(beyond.len() / 2), inside, &between[..])
    else {
        return false;
    };
    beyond.len() == 3 && *one < outside / 2.0 && *one > inside
}

/// The sweep's points as the detector sees them, one line each (size, Mbit/s, ci95,
/// trials, trials with both ends on one CPU / trials observed), to replay a failure found
/// elsewhere in a unit test (`crates/netsweep-model/src/anomaly/measured.rs`).
fn points_table(v: &Value) -> String {
    let none = Vec::new();
    let mut out = String::from("(size, mean Mbit/s, ci95, trials, same-CPU trials, observed):\n");
    for p in v["points"].as_array().unwrap_or(&none) {
        let t = &p["throughput_mbps"];
        out += &format!(
            "    ({}, {:.2}, {:.2}, {}, {}, {}),\n",
            p["size"],
            t["mean"].as_f64().unwrap_or(f64::NAN),
            t["ci95"].as_f64().unwrap_or(f64::NAN),
            t["trials"]
                .as_u64()
                .unwrap_or(0)
                .max(p["trials"].as_u64().unwrap_or(0)),
            p["placement"]["same_cpu_trials"],
            p["placement"]["observed_trials"],
        );
    }
    out
}

// IP lengths 1000..=1300: UDP payloads 972..=1272, TCP payloads (timestamps) 948..=1248.
#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn bands_near_the_mtu_are_dips_tcp_pingpong_unpinned_and_udp_stream_pinned() {
    let test = "bands_near_the_mtu_are_dips_tcp_pingpong_unpinned_and_udp_stream_pinned";
    require_labs(test);
    sweep(
        "band-hi",
        "200mbit",
        1000,
        1300,
        &[
            Case {
                name: "tcp-pingpong-unpinned",
                args: &["-t", "tcp", "-p", "pingpong", "--sizes", "700..1448:+16"],
                want: ("dip", 948, 1248),
                plotted: false,
            },
            // 16-byte steps where the band's edges are, 48 across its inside: a point inside
            // takes ~3.5 s (its trials are lengthened to the 5 Mbit/s class's queue, ~80 ms
            // of lag), and the inside places no edge.
            Case {
                name: "udp-stream-pinned",
                args: &[
                    "-t",
                    "udp",
                    "-p",
                    "stream",
                    "--sizes",
                    "800..992:+16,1040..1232:+48,1248..1472:+16",
                    "--cpu",
                    "0,1",
                ],
                want: ("dip", 972, 1272),
                plotted: true,
            },
            Case {
                name: "tcp-pingpong-unpinned-to-the-end",
                args: &["-t", "tcp", "-p", "pingpong", "--sizes", "700..1200:+16"],
                want: ("cliff", 940, 956),
                plotted: false,
            },
        ],
    );
}

// IP lengths 400..=600: UDP payloads 372..=572, TCP payloads 348..=548. At 100 Mbit/s the
// link, not the (debug-build, shared-CPU) sender, sets the small-datagram stream rate, which
// keeps the points beside the band steady enough to place its edges within one step.
#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn bands_at_small_sizes_are_dips_udp_pingpong_unpinned_udp_stream_unpinned_tcp_pinned() {
    let test = "bands_at_small_sizes_are_dips_udp_pingpong_unpinned_udp_stream_unpinned_tcp_pinned";
    require_labs(test);
    sweep(
        "band-lo",
        "100mbit",
        400,
        600,
        // 16-byte steps where the band's edges are, 48 across its inside (each point there
        // takes ~3 s: its trials last the 5 Mbit/s class's queue).
        &[Case {
            name: "udp-stream-unpinned",
            args: &[
                "-t",
                "udp",
                "-p",
                "stream",
                "--sizes",
                "200..392:+16,440..536:+48,552..800:+16",
            ],
            want: ("dip", 372, 572),
            plotted: false,
        }],
    );
    // Pingpongs on a 1 Gbit/s link: at 100 Mbit/s a round trip of a few hundred bytes every
    // 8 µs runs at the link's rate, and where the shaper's bucket stops covering it is a real
    // change of the path beside the band (tcp pinned, one run: 280 → 296 B, RTT/2 8.5 → 17.2 µs,
    // for good). At 1 Gbit/s a pingpong never reaches the link's rate. (udp unpinned once
    // found a dip from 232 B here, not 372: its first point had both ends on one CPU, and the
    // split points after it were taken for the chasm's edges — fixed in the detector, whose
    // unit test `a_placement_step_before_a_chasm_is_not_its_edge` replays that run.)
    sweep(
        "band-lo-pingpong",
        "1gbit",
        400,
        600,
        &[
            Case {
                name: "udp-pingpong-unpinned",
                args: &["-t", "udp", "-p", "pingpong", "--sizes", "200..800:+16"],
                want: ("dip", 372, 572),
                plotted: false,
            },
            Case {
                name: "tcp-pingpong-pinned",
                args: &[
                    "-t",
                    "tcp",
                    "-p",
                    "pingpong",
                    "--sizes",
                    "200..800:+16",
                    "--cpu",
                    "0,0",
                ],
                want: ("dip", 348, 548),
                plotted: false,
            },
        ],
    );
}

/// The tolerance for a partly shaped edge point, on the tcp pinned run that needed it (sizes
/// 504..600 of the CI run's table): 536 B read 74 Mbit/s between 14.7 inside and 288 beyond.
#[test]
fn a_partly_shaped_point_is_the_only_slack_at_an_edge() {
    let table = |at_536: f64| {
        let pts: Vec<Value> = [
            (504, 11.76),
            (520, 14.71),
            (536, at_536),
            (552, 288.00),
            (568, 250.52),
            (584, 304.81),
            (600, 283.90),
        ]
        .iter()
        .map(|&(size, mean)| serde_json::json!({"size": size, "throughput_mbps": {"mean": mean}}))
        .collect();
        serde_json::json!({ "points": pts })
    };
    assert!(partly_shaped(&table(74.47), 520, 548));
    // Shaped in full (the detector should have taken it) or not at all: no slack.
    assert!(!partly_shaped(&table(9.0), 520, 548));
    assert!(!partly_shaped(&table(290.0), 520, 548));
    // Two points short of the edge is never within tolerance.
    assert!(!partly_shaped(&table(74.47), 504, 548));
}
