//! The lab's path emulator (issue 30) against ground truth: a delayed path adds exactly its
//! delay to a round trip; the frames it drops, duplicates and reorders are the datagrams
//! netsweep's accounting finds lost, duplicated and reordered, exactly; strict priority keeps
//! a high band's round trip within one frame's serialisation of idle under a saturating low
//! band; and it keeps its schedule at 100 Mbit/s with one CPU. Needs root: ignored without
//! it, run by ./run-tests as root.

use crate::common::*;
use netsweep_emu::Counters;
use netsweep_lab::emulation::{set_emulator_exe, Window};
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::idle::CpuWindow;
use netsweep_testkit::lab::stall::{StallProbe, MAX_STALL_NS};
use netsweep_testkit::lab::{lab_test, run_id};
use serde_json::Value;

/// A lab and the `netsweep serve` in its server host (killed on drop, before the lab).
pub(crate) struct EmuLab {
    server: std::process::Child,
    lab: Lab,
}

impl Drop for EmuLab {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

impl std::ops::Deref for EmuLab {
    type Target = Lab;
    fn deref(&self) -> &Lab {
        &self.lab
    }
}

/// Two hosts joined by an emulated link (link 0, `emulate` its table, `extra` more link
/// fields) and one whose emulator does nothing (link 1: the path's own round trip, emulator
/// hops included), a server listening.
pub(crate) fn lab(tag: &str, extra: &str, emulate: &str) -> EmuLab {
    set_emulator_exe(bin());
    let topo = format!(
        r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
name = "emulated"
a = "client"
b = "server"
{extra}
[links.emulate]
{emulate}
[[links]]
name = "plain"
a = "client"
b = "server"
[links.emulate]
"#
    );
    let lab = Lab::up(&Topology::parse(&topo).unwrap(), &run_id(tag)).unwrap();
    let server = serve_in(&lab, "server", "0.0.0.0", 7200);
    EmuLab { server, lab }
}

/// The server's address on link `i`.
pub(crate) fn server_addr(lab: &Lab, i: usize) -> String {
    lab.layout().links[i].b.addr.to_string()
}

/// Runs `netsweep run` in the client host with `args`; its results.
pub(crate) fn run_in(lab: &Lab, tag: &str, args: &[&str]) -> Value {
    let out = scratch(tag).join("run.json");
    let mut argv = vec![bin(), "run"];
    argv.extend_from_slice(args);
    argv.extend(["--no-save", "-q", "-o", out.to_str().unwrap()]);
    let o = lab.command("client", &argv).unwrap().output().unwrap();
    assert!(
        o.status.success(),
        "netsweep run {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

/// The emulator's counters and lateness for direction `d` (0: client → server) over a window.
pub(crate) fn direction(window: &Value, d: usize) -> (Counters, Value) {
    let dir = &window[0]["directions"][d];
    (
        serde_json::from_value(dir["counters"].clone()).unwrap(),
        dir["lateness"].clone(),
    )
}

/// Sums a datagram count over a run's points.
fn points_sum(v: &Value, field: &str) -> u64 {
    points_total(v, &format!("/loss/{field}"))
}

/// The sum over the run's points of the number at JSON `pointer` in each (0 where absent).
fn points_total(v: &Value, pointer: &str) -> u64 {
    v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.pointer(pointer).and_then(Value::as_u64).unwrap_or(0))
        .sum()
}

/// Whether the machine was quiet over a test's window, measured: other processes and steal
/// (CpuWindow) and stalls of a real-time thread (StallProbe: a vCPU taken by the hypervisor,
/// which no scheduling of the test's own processes explains). A bound on a tail — a p99, a
/// lateness, TCP's rate over a long path — holds only then.
pub(crate) struct Quiet(CpuWindow, StallProbe);

impl Quiet {
    pub(crate) fn start() -> Quiet {
        Quiet(CpuWindow::start(), StallProbe::start())
    }

    /// `None` when quiet, else why not.
    pub(crate) fn finish(self) -> Option<String> {
        let (busy, stalls) = (self.0.finish(), self.1.finish());
        (!(busy.idle_enough() && stalls.quiet())).then(|| format!("{busy}; {stalls}"))
    }
}

const UDP_STREAM: &[&str] = &[
    "-t",
    "udp",
    "-p",
    "stream",
    "--sizes",
    "1200",
    "--no-warmup",
    "--trial-time",
    "100ms",
    "--max-point-time",
    "1s",
];

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn a_delayed_path_adds_its_delay_to_the_round_trip() {
    let _l = lab_test("a_delayed_path_adds_its_delay_to_the_round_trip");
    let lab = lab("emu-rtt", "", r#"delay = "10ms""#);
    let rtt = |i: usize| {
        let v = run_in(
            &lab,
            &format!("emu-rtt-{i}"),
            &[
                &server_addr(&lab, i),
                "-t",
                "udp",
                "-p",
                "pingpong",
                "--sizes",
                "64",
                "--trial-time",
                "400ms",
                "--max-point-time",
                "3s",
            ],
        );
        let r = v["points"][0]["latency"]["rtt_ns"].clone();
        let f = |k: &str| r[k].as_f64().unwrap();
        (f("min"), f("p50"), f("p99"))
    };
    let quiet = Quiet::start();
    let (plain_min, plain, _) = rtt(1);
    let w = Window::open(lab.lab.layout());
    let (min, p50, p99) = rtt(0);
    let (window, _) = w.close();
    let quiet = quiet.finish();
    // The emulator's own account of how late it released frames over the same window, each
    // way: on a host that takes its CPU away, the round trip carries that lateness.
    let late = |d: usize| direction(&window, d).1["p50_ns"].as_u64().unwrap() as f64;
    let (late_out, late_back) = (late(0), late(1));
    // The delay is a floor that a busy host only adds to: the fastest exchange through the
    // emulator is never under the fastest on the plain path plus 2 × 10 ms (less 1%), and over
    // it by no more than 1% and the emulator's own hop (two user-space relays, 500 µs at
    // most) on any host that let a few exchanges of the run through untouched.
    let floor = 20e6 + plain_min;
    assert!(
        min >= floor - 0.01 * 20e6 && min <= floor + 0.01 * 20e6 + 500e3,
        "RTT min {:.3} ms, want {:.3} ms + up to 1% and 0.5 ms (plain path min {:.3} ms)",
        min / 1e6,
        floor / 1e6,
        plain_min / 1e6
    );
    // The median within 1% + 100 µs where the machine is idle. On a busy host the two ends, asleep for
    // 10 ms each exchange, wake later than on a path that keeps them running, by as much as
    // the host stalls (a measured 1.3 ms p99 at 7% steal): there only a gross error (a
    // quarter of the delay) fails it.
    // The emulator's own hop (two user-space relays, slower in a debug build: a measured
    // 0.33 ms over 2 × 10 ms + the plain path's median, with 0.11 ms of counted lateness)
    // is in its fastest exchange too, which the bound above holds to the delay: the median
    // is that exchange plus what the plain path's median adds to its own fastest.
    let want = min + (plain - plain_min);
    let slack = match &quiet {
        None => 0.01 * 20e6 + 100e3,
        Some(why) => {
            eprintln!("SKIPPED the RTT p50 bound (1% + 100 µs), kept 25% of the delay: {why}");
            0.25 * 20e6
        }
    };
    assert!(
        (p50 - want).abs() <= slack,
        "RTT p50 {:.3} ms, want {:.3} ms ± {:.3} ms (min {:.3} ms; plain path {:.3} ms, min \
         {:.3} ms; emulator lateness p50 {:.3} and {:.3} ms)",
        p50 / 1e6,
        want / 1e6,
        slack / 1e6,
        min / 1e6,
        plain / 1e6,
        plain_min / 1e6,
        late_out / 1e6,
        late_back / 1e6
    );
    eprintln!(
        "emulated RTT min {:.3} ms p50 {:.3} ms p99 {:.3} ms; plain path min {:.3} ms p50 {:.3} \
         ms; emulator lateness p50 {:.0} and {:.0} µs",
        min / 1e6,
        p50 / 1e6,
        p99 / 1e6,
        plain_min / 1e6,
        plain / 1e6,
        late_out / 1e3,
        late_back / 1e3
    );
    match &quiet {
        None => assert!(p99 <= 1.05 * p50, "p99 {p99} above 1.05 × p50 {p50}"),
        Some(why) => eprintln!("SKIPPED the p99 bound (p99 ≤ 1.05 × p50): {why}"),
    }
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn the_emulators_drops_are_the_datagrams_netsweep_finds_lost() {
    let _l = lab_test("the_emulators_drops_are_the_datagrams_netsweep_finds_lost");
    let lab = lab(
        "emu-loss",
        "",
        "loss = \"2%\"\nprotocol = \"udp\"\ndirection = \"a-to-b\"",
    );
    let w = Window::open(lab.lab.layout());
    let mut args = vec![server_addr(&lab, 0)];
    args.extend(UDP_STREAM.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = run_in(&lab, "emu-loss", &args);
    let (emu, _) = direction(&w.close().0, 0);
    let t = &v["datagram_totals"];
    let sent = t["to_server_sent"].as_u64().unwrap();
    let received = t["to_server_received"].as_u64().unwrap();
    let socket_drops = t["to_server_socket_drops"].as_u64().unwrap_or(0);
    // Cookie datagrams the emulator dropped were resent: the client counts every one it sent.
    let cookies = v["granted"]["client"]["handshake_datagrams"]
        .as_u64()
        .unwrap();
    assert!(emu.dropped_loss > 0, "{emu:?}");
    assert_eq!(
        emu.dropped() + socket_drops,
        sent - received + (cookies - 1),
        "emulator {emu:?}; netsweep sent {sent}, received {received}, socket drops {socket_drops}, \
         cookies {cookies}"
    );
    assert_eq!(
        emu.received,
        sent + cookies,
        "every datagram crossed the emulator once"
    );
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn the_emulators_duplicates_and_reorders_are_the_ones_netsweep_counts() {
    let _l = lab_test("the_emulators_duplicates_and_reorders_are_the_ones_netsweep_counts");
    let lab = lab(
        "emu-dup",
        "",
        "delay = \"1ms\"\nduplicate = \"2%\"\nreorder = \"3%\"\nprotocol = \"udp\"\ndirection = \"a-to-b\"",
    );
    // Trials of 5 ms: an unpaced UDP sender outruns a server that shares two CPUs with it
    // and the emulator (here 1.5 Gbit/s sent, 1.1 received), and only a burst the server's
    // 8 MB socket buffer holds whole loses nothing after the emulator counted it (20 ms
    // trials lost 200–2000 datagrams per run on this VM). A server not scheduled for a few
    // ms still makes its socket drop; the counts are then not comparable exactly. That
    // precondition is measured (netsweep reports the socket's own drop count), not assumed:
    // a run with drops is said and made again, three at most.
    let addr = server_addr(&lab, 0);
    let mut tries = Vec::new();
    let (v, emu) = loop {
        let w = Window::open(lab.lab.layout());
        let v = run_in(
            &lab,
            "emu-dup",
            &[
                &addr,
                "-t",
                "udp",
                "-p",
                "stream",
                "--sizes",
                "1200",
                "--no-warmup",
                "--trial-time",
                "5ms",
                "--max-point-time",
                "1s",
                // Three trials, not up to thirty: every trial is a chance for a server that
                // was not scheduled to drop at its socket (the whole suite: 9 of 9 runs of
                // up to 30 trials dropped); three still carry ~40 duplicates to count.
                "--min-trials",
                "3",
                "--max-trials",
                "3",
                "--rcvbuf",
                "4M",
            ],
        );
        let (emu, _) = direction(&w.close().0, 0);
        let drops = v["datagram_totals"]["to_server_socket_drops"]
            .as_u64()
            .unwrap_or(0);
        if drops == 0 {
            break (v, emu);
        }
        eprintln!(
            "run {}: the server's socket dropped {drops} datagrams; again",
            tries.len() + 1
        );
        tries.push(drops);
        assert!(
            tries.len() < 3,
            "the server's socket dropped datagrams in every run ({tries:?}): the counts cannot \
             be compared exactly"
        );
    };
    // A frame lost after the emulator counted it would make the two counts differ: there is
    // none to lose here but what the kernel drops before the emulator reads (never a copy).
    assert_eq!(
        emu.dropped_send + emu.dropped_queue + emu.dropped_no_buffer,
        0,
        "{emu:?}"
    );
    assert!(emu.duplicated > 0 && emu.reordered > 0, "{emu:?}");
    // A duplicated cookie reaches the data socket after it was bound: netsweep counts it
    // foreign. A trial's receiver stops once every datagram the client announced has
    // arrived, so a duplicate released after that is read by the next trial (foreign: the
    // next trial's cookie differs) — or, after the run's last trial, never read (CI saw one
    // in 583). Those are the only datagrams the emulator released that the server did not
    // read: the identity below is exact, and the unread ones are few.
    let read = points_total(&v, "/server/messages_received");
    let counted = points_sum(&v, "duplicates") + points_sum(&v, "foreign");
    // The server's handshake takes the first cookie to arrive; any other (a resent one, a
    // copy) reaches the data socket and is read as foreign.
    let unread = emu.released.checked_sub(read + 1).unwrap_or_else(|| {
        panic!("the server read {read} datagrams and a cookie, more than the emulator released: {emu:?}")
    });
    assert_eq!(
        emu.duplicated,
        counted + unread,
        "emulator {emu:?}; the server read {read} datagrams and a cookie\n{}",
        v["points"]
    );
    assert!(
        unread <= 3,
        "{unread} duplicates never read: more than the last trial's tail\n{emu:?}"
    );
    assert_eq!(
        emu.reordered,
        points_sum(&v, "reordered"),
        "{emu:?}\n{}",
        v["points"]
    );
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn strict_priority_keeps_a_high_bands_round_trip_within_one_frame_of_idle() {
    let _l = lab_test("strict_priority_keeps_a_high_bands_round_trip_within_one_frame_of_idle");
    // 10 Mbit/s: a 1514-byte frame takes 1.21 ms on the wire.
    let lab = lab(
        "emu-prio",
        "rate = \"10mbit\"",
        // UDP only: the runs' control connections pass beside the bottleneck, so a
        // saturated band cannot starve the exchanges that start and end trials.
        "qdisc = \"prio\"\nbands = 2\nqueue = \"256KiB\"\nprotocol = \"udp\"",
    );
    let addr = server_addr(&lab, 0);
    let pingpong = |tag: &str| {
        let v = run_in(
            &lab,
            tag,
            &[
                &addr,
                "-t",
                "udp",
                "-p",
                "pingpong",
                "--sizes",
                "64",
                "--tos",
                "0x20",
                "--trial-time",
                "300ms",
                "--max-point-time",
                "2s",
            ],
        );
        v["points"][0]["latency"]["rtt_ns"]["p50"].as_f64().unwrap()
    };
    let idle_rtt = pingpong("emu-prio-idle");
    // A band-0 (CS0) UDP stream saturating the link, beside the band-1 (CS1) pingpong.
    let out = scratch("emu-prio-load").join("run.json");
    let mut load = lab
        .command(
            "client",
            &[
                bin(),
                "run",
                &addr,
                "-t",
                "udp",
                "-p",
                "stream",
                "--sizes",
                "1472",
                "--no-warmup",
                "--trial-time",
                "3s",
                "--max-point-time",
                "4s",
                "--no-save",
                "-q",
                "-o",
                out.to_str().unwrap(),
            ],
        )
        .unwrap()
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let loaded_rtt = pingpong("emu-prio-loaded");
    let _ = load.wait();
    let frame_ns = 1514.0 * 8.0 / 10e6 * 1e9;
    eprintln!(
        "band 1 RTT p50: idle {:.3} ms, under a saturating band 0 {:.3} ms (one frame {:.3} ms)",
        idle_rtt / 1e6,
        loaded_rtt / 1e6,
        frame_ns / 1e6
    );
    // Each way the high frame waits at most for the frame on the wire.
    assert!(
        loaded_rtt <= idle_rtt + 2.0 * frame_ns,
        "loaded {loaded_rtt} ns vs idle {idle_rtt} ns"
    );
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn one_cpu_keeps_the_schedule_at_100_mbit() {
    let _l = lab_test("one_cpu_keeps_the_schedule_at_100_mbit");
    let lab = lab(
        "emu-cpu",
        "rate = \"100mbit\"",
        "delay = \"5ms\"\nqueue = \"1MiB\"\ncpu = 1",
    );
    let w = Window::open(lab.lab.layout());
    let mut args = vec![server_addr(&lab, 0)];
    args.extend(UDP_STREAM.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let quiet = Quiet::start();
    let v = run_in(&lab, "emu-cpu", &args);
    let quiet = quiet.finish();
    let (window, _) = w.close();
    let (_, late) = direction(&window, 0);
    let p99 = late["p99_ns"].as_u64().unwrap();
    for d in 0..2 {
        let (emu, late) = direction(&window, d);
        eprintln!(
            "emulator on CPU 1 at 100 Mbit/s, direction {d}: {} frames released, lateness p50 {} µs \
             p99 {} µs max {} µs",
            emu.released,
            late["p50_ns"].as_u64().unwrap() / 1000,
            late["p99_ns"].as_u64().unwrap() / 1000,
            late["max_ns"].as_u64().unwrap() / 1000
        );
    }
    let rate = v["points"][0]["receiver_mbps"]["mean"].as_f64().unwrap();
    // 1200-byte datagrams in 1242-byte frames: 96.6 Mbit/s of payload at most.
    assert!(rate <= 1200.0 / 1242.0 * 100.0 * 1.01, "{rate} Mbit/s");
    match quiet {
        None => {
            // The loaded direction keeps its schedule to its tail (so, under its 500 µs limit,
            // it is not warned about).
            assert!(p99 < 100_000, "lateness p99 {p99} ns");
            // The stream floods the emulator far past its rate: no frame waits for the loop to
            // drain the flood, nor for the kernel to let a busy real-time thread run again
            // (each held releases 44-48 ms; as an ordinary thread past its share it waits a
            // few ms at most).
            let worst = late["max_ns"].as_u64().unwrap();
            assert!(
                worst <= 10 * MAX_STALL_NS,
                "a-to-b: a frame {worst} ns late"
            );
            // The other carries a few dozen frames (the control connection): its p99 is its
            // worst frame, and no frame may wait longer than the host stalled. A report
            // written on the loop's thread held one for 35 ms.
            let (_, back) = direction(&window, 1);
            let worst = back["max_ns"].as_u64().unwrap();
            assert!(worst <= MAX_STALL_NS, "b-to-a: a frame {worst} ns late");
        }
        Some(why) => eprintln!("SKIPPED the lateness bounds (p99 < 100 µs): {why}"),
    }
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn tcp_across_40_ms_and_100_mbit_moves_the_rate_after_headers() {
    let _l = lab_test("tcp_across_40_ms_and_100_mbit_moves_the_rate_after_headers");
    // A 100 Mbit/s bottleneck with 20 ms each way (a 40 ms round trip) and its default queue
    // (50 ms of the rate): a long, fat path.
    let lab = lab("emu-tcp", "rate = \"100mbit\"", "delay = \"20ms\"");
    let w = Window::open(lab.lab.layout());
    let addr = server_addr(&lab, 0);
    let quiet = Quiet::start();
    let v = run_in(
        &lab,
        "emu-tcp",
        &[
            &addr,
            "-t",
            "tcp",
            "-p",
            "stream",
            "--sizes",
            "128k",
            "--cc",
            "bbr",
            "--min-trials",
            "2",
            "--max-trials",
            "2",
        ],
    );
    let quiet = quiet.finish();
    let (window, _) = w.close();
    let (emu, late) = direction(&window, 0);
    let p = &v["points"][0];
    let goodput = p["receiver_mbps"]["mean"].as_f64().unwrap();
    // Full-sized segments: 1448 bytes of payload in a 1514-byte frame (TCP timestamps on).
    let arithmetic = 100.0 * 1448.0 / 1514.0;
    // The bottleneck's own count over the same window: the bytes it released, at most the
    // rate over the run.
    eprintln!(
        "goodput {goodput:.2} Mbit/s, arithmetic {arithmetic:.2}; emulator released {} frames \
         ({} dropped at its queue), lateness p99 {} µs; notes {}",
        emu.released,
        emu.dropped_queue,
        late["p99_ns"].as_u64().unwrap_or(0) / 1000,
        p["notes"]
    );
    // Whatever the machine: no more than the bottleneck allows, and every byte the server
    // received went through the emulator (its own count, over the whole run, warm-ups too).
    assert!(
        goodput <= arithmetic * 1.03,
        "goodput {goodput:.2} Mbit/s over a {arithmetic:.2} Mbit/s bottleneck"
    );
    let received = p["server"]["bytes_received"].as_u64().unwrap();
    assert!(
        received > 0 && received <= emu.released * 1448,
        "{received} bytes received, {} frames released",
        emu.released
    );
    // Within 5% of the arithmetic on a quiet machine. The peer tool sets the band: iperf3
    // -t 8 read 92.9 on the same path (−2.9%), and netsweep has read 92.1–93.3 on quiet
    // runs (−3.7% to −2.5%; at 92.2 BBR's probing had 565 frames dropped at the emulator's
    // queue), so a 3% bound failed about one full suite in three for TCP's own spread. On a
    // busy machine the userspace emulator and TCP's recoveries are starved by stalls (beside
    // a compile: 89.16, −6.8%, the host stalling a real-time thread for 14 ms): the bound is
    // skipped, saying why.
    match quiet {
        None => assert!(
            (goodput - arithmetic).abs() <= 0.05 * arithmetic,
            "goodput {goodput:.2} Mbit/s against {arithmetic:.2} on a quiet machine"
        ),
        Some(why) => eprintln!(
            "SKIPPED the goodput bound (within 5% of {arithmetic:.2}; got {goodput:.2}): {why}"
        ),
    }
    assert!(
        p["notes"].to_string().contains("trials lengthened"),
        "a 40 ms path gets trials long enough for its rate: {}",
        p["notes"]
    );
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn netem_and_the_emulator_agree_where_the_kernel_has_netem() {
    let _l = lab_test("netem_and_the_emulator_agree_where_the_kernel_has_netem");
    if !netsweep_lab::emulation::netem_available() {
        eprintln!(
            "SKIPPED: this kernel has no netem (sch_netem): there is nothing to compare the \
             emulator with; a lab with engine = \"auto\" uses netsweep's emulator here"
        );
        return;
    }
    let rtt = |engine: &str| {
        let lab = lab(
            &format!("emu-{engine}"),
            "",
            &format!("delay = \"10ms\"\nengine = \"{engine}\""),
        );
        let v = run_in(
            &lab,
            &format!("emu-{engine}"),
            &[
                &server_addr(&lab, 0),
                "-t",
                "udp",
                "-p",
                "pingpong",
                "--sizes",
                "64",
                "--trial-time",
                "400ms",
            ],
        );
        v["points"][0]["latency"]["rtt_ns"]["p50"].as_f64().unwrap()
    };
    let (netem, ours) = (rtt("netem"), rtt("netsweep"));
    eprintln!(
        "RTT p50: netem {:.3} ms, netsweep's emulator {:.3} ms",
        netem / 1e6,
        ours / 1e6
    );
    assert!(
        (netem - ours).abs() <= 0.01 * 20e6 + 300e3,
        "{netem} vs {ours}"
    );
}
