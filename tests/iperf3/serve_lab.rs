//! Issue 32 across lab links: `netsweep serve --iperf3` in one namespace, Debian's `iperf3 -c`
//! in another. The UDP loss the client prints is the datagrams an nft rule dropped (a rule on
//! iperf3's sequence number, so the count is exact), for netsweep and for `iperf3 -s` alike;
//! through a tbf-shaped link the client reads the shaper's arithmetic, and the qdisc's own byte
//! counter over the same test agrees; the demo of the issue (one of each command, then eight at
//! once) completes.

use crate::common::iperf3::*;
use crate::common::*;
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::{lab_test, run_id};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

fn lab(tag: &str, rate: Option<&str>) -> Lab {
    let mut topo = "[[hosts]]\nname = \"client\"\n[[hosts]]\nname = \"server\"\n[[links]]\n\
                    a = \"client\"\nb = \"server\"\nmtu = 1500\n"
        .to_string();
    if let Some(r) = rate {
        topo += &format!("rate = \"{r}\"\n");
    }
    Lab::up(&Topology::parse(&topo).unwrap(), &run_id(tag)).unwrap()
}

/// `netsweep serve --iperf3` (port 5201) in the lab's server, its records in `dir`.
fn serve(lab: &Lab, ip: &str, dir: &std::path::Path, extra: &[&str]) -> Killed {
    let mut args = vec![
        bin(),
        "serve",
        "--bind",
        ip,
        "--port",
        "7200",
        "--iperf3",
        "--iperf3-results",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    // The log beside the records: a failed test's reason is there.
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let child = lab
        .command("server", &args)
        .unwrap()
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_listening(child.id(), 5201);
    Killed(child)
}

fn iperf3_s_in(lab: &Lab, ip: &str) -> Killed {
    let child = lab
        .command("server", &["iperf3", "-s", "-B", ip])
        .unwrap()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(child.id(), 5201);
    Killed(child)
}

fn client_in(lab: &Lab, ip: &str, args: &[&str]) -> Value {
    let mut a = vec!["iperf3", "-c", ip, "-J"];
    a.extend_from_slice(args);
    client_json(lab.command("client", &a).unwrap(), Duration::from_secs(60))
}

/// Drops, in `host`'s input, every UDP datagram of iperf3's port whose 32-bit sequence number
/// ends in 5 (mod 16), counted; the 4-byte connect datagram is too short to match.
fn drop_every_sixteenth(lab: &Lab, host: &str, port_match: &str) {
    let rules = format!(
        "table inet nsw_i3loss {{\n counter dropped {{}}\n chain input {{\n  type filter hook \
         input priority 0;\n  {port_match} 5201 @th,156,4 5 counter name \"dropped\" drop\n }}\n}}\n"
    );
    nft_into(lab, host, &rules);
}

fn dropped(lab: &Lab, host: &str) -> u64 {
    let argv = [
        "nft",
        "-j",
        "list",
        "counter",
        "inet",
        "nsw_i3loss",
        "dropped",
    ];
    let o = lab.command(host, &argv).unwrap().output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let (packets, _) = netsweep_lab::counters::parse_nft_counter(&text).expect("the nft counter");
    packets
}

/// The kernel's count of datagrams dropped for a full receive buffer in `host`
/// (/proc/net/snmp, Udp RcvbufErrors).
fn rcvbuf_errors(lab: &Lab, host: &str) -> u64 {
    let o = lab
        .command(host, &["cat", "/proc/net/snmp"])
        .unwrap()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let udp: Vec<&str> = text.lines().filter(|l| l.starts_with("Udp:")).collect();
    let (names, values) = (udp[0].split_whitespace(), udp[1].split_whitespace());
    let at = names.clone().position(|n| n == "RcvbufErrors").unwrap();
    values.clone().nth(at).unwrap().parse().unwrap()
}

fn reset_counter(lab: &Lab, host: &str) {
    let o = lab
        .command(
            host,
            &["nft", "reset", "counter", "inet", "nsw_i3loss", "dropped"],
        )
        .unwrap()
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests installs it and runs this"]
fn udp_loss_is_what_an_nft_rule_dropped() {
    require_tool("udp_loss_is_what_an_nft_rule_dropped", "iperf3", "iperf3");
    let _l = lab_test("iperf3_serve_udp_loss");
    let lab = lab("i3loss", None);
    let ip = lab.layout().links[0].b.addr.to_string();
    let dir = scratch("iperf3-serve-loss");
    drop_every_sixteenth(&lab, "server", "udp dport");
    drop_every_sixteenth(&lab, "client", "udp sport");
    let args = ["-u", "-b", "20M", "-l", "1000", "-t", "2"];
    for (name, reverse) in [("forward", false), ("reverse", true)] {
        let mut a = args.to_vec();
        if reverse {
            a.push("-R");
        }
        let at = if reverse { "client" } else { "server" };
        for server in ["netsweep", "iperf3 -s"] {
            let _s = if server == "netsweep" {
                serve(&lab, &ip, &dir, &[])
            } else {
                iperf3_s_in(&lab, &ip)
            };
            reset_counter(&lab, at);
            let overflow0 = rcvbuf_errors(&lab, at);
            let j = client_in(&lab, &ip, &a);
            assert!(j.get("error").is_none(), "{server} {name}: {}", j["error"]);
            let s = client_streams(&j)[0];
            let (lost, packets) = (s.lost.unwrap(), s.packets.unwrap());
            // A few datagrams sent after the receiver stopped reading may still meet the
            // rule; in reverse the server sends until TEST_END.
            std::thread::sleep(Duration::from_millis(300));
            let drops = dropped(&lab, at);
            // Datagrams the receiving kernel dropped for a full socket buffer are lost too.
            let overflow = rcvbuf_errors(&lab, at) - overflow0;
            // The rule drops sequence numbers 5, 21, 37, …: the receiver counts a gap for
            // each below the highest it received.
            eprintln!(
                "{server} {name}: client lost {lost}/{packets}, nft dropped {drops}, receive \
                 buffer overflowed {overflow}"
            );
            assert!(packets > 1000, "{server} {name}: {packets}");
            if !reverse {
                let sent = packets;
                let by_rule = (sent + 11) / 16;
                assert_eq!(drops, by_rule, "{server} {name}");
                let trailing = u64::from(sent % 16 == 5);
                let expected = drops - trailing + overflow;
                if server == "netsweep" {
                    assert_eq!(lost, expected, "{server} {name}");
                } else {
                    // iperf3 -s stops reading at TEST_END: a datagram still in flight then
                    // is neither received nor lost, so a dropped sequence number among the
                    // last ones is no gap below the highest it read. A CI run saw 4998 sent,
                    // 313 dropped, 312 lost (4997 dropped, 4998 unread).
                    assert!(
                        lost <= expected && expected <= lost + 1,
                        "{server} {name}: lost {lost}, expected {expected}"
                    );
                }
            } else {
                // The server sends until TEST_END: a datagram or two may meet the rule after
                // the client stopped reading.
                let counted = drops + overflow;
                assert!(lost <= counted && counted <= lost + 2, "{server} {name}");
            }
        }
    }
    let recs = records(&dir);
    assert_eq!(recs.len(), 2, "{recs:?}");
    drop(lab);
}

#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests installs it and runs this"]
fn through_a_shaped_link_iperf3_reads_the_shapers_arithmetic() {
    require_tool("through_a_shaped_link", "iperf3", "iperf3");
    let _l = lab_test("iperf3_serve_shaped");
    let lab = lab("i3tbf", Some("100mbit"));
    let link = lab.layout().links[0].name.clone();
    let ip = lab.layout().links[0].b.addr.to_string();
    let dir = scratch("iperf3-serve-tbf");
    let _s = serve(&lab, &ip, &dir, &[]);
    // TCP/IPv4 at MTU 1500 carries 1448 payload bytes per 1514-byte frame (docs/lab.md).
    let expected = 100.0 * 1448.0 / 1514.0;
    for (name, reverse, host) in [("forward", false, "client"), ("reverse", true, "server")] {
        let iface = lab.interface(host, &link).unwrap().to_string();
        let before = qdisc_stat(&lab, host, &iface, Some("tbf"), "bytes");
        let mut a = vec!["-t", "4"];
        if reverse {
            a.push("-R");
        }
        let cpu = netsweep_testkit::lab::idle::CpuWindow::start();
        let j = client_in(&lab, &ip, &a);
        let busy = cpu.finish();
        let after = qdisc_stat(&lab, host, &iface, Some("tbf"), "bytes");
        assert!(j.get("error").is_none(), "{name}: {}", j["error"]);
        let r = &j["end"]["sum_received"];
        let (bps, secs) = (
            r["bits_per_second"].as_f64().unwrap() / 1e6,
            r["seconds"].as_f64().unwrap(),
        );
        let wire = (after - before) as f64 * 8.0 / secs / 1e6;
        let payload = r["bytes"].as_f64().unwrap() / (after - before) as f64;
        eprintln!(
            "{name}: iperf3 -c reads {bps:.2} Mbit/s (shaper arithmetic {expected:.2}); the \
             qdisc sent {wire:.2} Mbit/s of frames over the test, payload {payload:.4} of them \
             (1448/1514 = {:.4})",
            1448.0 / 1514.0
        );
        // The ground truth: what iperf3 says it received is the payload of the frames the
        // link's qdisc sent over the same test. The shaper's arithmetic (the link full the
        // whole time) holds only where nothing else took the CPUs: checked when idle.
        assert!(
            (payload / (1448.0 / 1514.0) - 1.0).abs() < 0.03,
            "{name}: iperf3's bytes are {payload:.4} of the qdisc's ({bps:.2} Mbit/s read, the \
             qdisc sent {wire:.2})"
        );
        check_arithmetic_when_idle(name, bps, expected, 0.03, &busy);
        check_arithmetic_when_idle(&format!("{name} (qdisc)"), wire, 100.0, 0.03, &busy);
    }
    drop(lab);
}

#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests installs it and runs this"]
fn the_issues_demo_one_of_each_then_eight_at_once() {
    require_tool("the_issues_demo", "iperf3", "iperf3");
    let _l = lab_test("iperf3_serve_demo");
    let lab = lab("i3demo", None);
    let ip = lab.layout().links[0].b.addr.to_string();
    let dir = scratch("iperf3-serve-demo");
    let _s = serve(&lab, &ip, &dir, &["--max-sessions-per-ip", "8"]);
    for args in [
        &[][..],
        &["-R", "-u", "-b", "100M"][..],
        &["-P", "4", "--bidir"][..],
    ] {
        let mut a = vec!["iperf3", "-c", ip.as_str(), "-t", "2"];
        a.extend_from_slice(args);
        let o = lab.command("client", &a).unwrap().output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{args:?}: {out}");
        assert!(
            out.contains("receiver") && out.contains("iperf Done."),
            "{out}"
        );
    }
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let mut c = lab
                .command("client", &["iperf3", "-c", ip.as_str(), "-t", "3", "-J"])
                .unwrap();
            if i % 2 == 1 {
                c.arg("-R");
            }
            std::thread::spawn(move || client_json(c, Duration::from_secs(60)))
        })
        .collect();
    for (i, h) in clients.into_iter().enumerate() {
        let j = h.join().unwrap();
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        assert!(
            j.get("error").is_none(),
            "client {i}: {}\n{log}",
            j["error"]
        );
    }
    assert_eq!(wait_records(&dir, 11).len(), 11);
    drop(lab);
}

/// The same `iperf3 -c ARGS` across `lab`'s link against `iperf3 -s`, then against `netsweep
/// serve --iperf3` (records in `dir`): the client's JSON from each.
fn against_both(lab: &Lab, ip: &str, dir: &std::path::Path, args: &[&str]) -> (Value, Value) {
    let theirs = {
        let _t = iperf3_s_in(lab, ip);
        client_in(lab, ip, args)
    };
    let _s = serve(lab, ip, dir, &[]);
    (theirs, client_in(lab, ip, args))
}

/// Issue 41 item 3: `iperf3 -c -u -R -b 60M` across a 50 Mbit/s link. `iperf3 -s` sends what the
/// link carries, its socket's default send buffer holding it back once the shaper's queue
/// fills, and loses nothing; netsweep's server must do the same, not send the full 60 Mbit/s
/// into a 4 MiB send buffer the shaper's queue cannot hold and lose a sixth of it.
#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests installs it and runs this"]
fn udp_reverse_above_the_link_rate_is_held_back_as_iperf3_s_is() {
    require_tool("udp_reverse_above_the_link_rate", "iperf3", "iperf3");
    let _l = lab_test("iperf3_serve_udp_reverse_over_rate");
    let lab = lab("i3udpr", Some("50mbit"));
    let ip = lab.layout().links[0].b.addr.to_string();
    let dir = scratch("iperf3-serve-udp-r");
    let args = ["-u", "-R", "-b", "60M", "-t", "3"];
    let figures = |j: &Value| {
        assert!(j.get("error").is_none(), "{}", j["error"]);
        let s = &j["end"]["sum"];
        (
            s["lost_percent"].as_f64().unwrap(),
            s["bits_per_second"].as_f64().unwrap() / 1e6,
        )
    };
    let (theirs, ours) = against_both(&lab, &ip, &dir, &args);
    let (theirs, ours) = (figures(&theirs), figures(&ours));
    eprintln!(
        "-u -R -b 60M across 50 Mbit/s: iperf3 -s lost {:.2}% at {:.2} Mbit/s; netsweep lost \
         {:.2}% at {:.2} Mbit/s",
        theirs.0, theirs.1, ours.0, ours.1
    );
    assert!(
        ours.0 <= theirs.0 + 1.0,
        "netsweep lost {:.2}%, iperf3 -s {:.2}%",
        ours.0,
        theirs.0
    );
}

/// Issue 41 item 1 across a 50 Mbit/s link: `-P 128` against `netsweep serve --iperf3`, read
/// from Debian's client's own output, within 3% of what the same client reads from `iperf3 -s`
/// over the same link just before and of the shaper's arithmetic, 50 × 1448/1514, when the
/// machine was idle (within 25% of iperf3 -s when it was not). The 128 sockets hold megabytes that drain for seconds after
/// TEST_END at a fraction of the link; counting that tail read 43 Mbit/s. (`-P 4 --bidir`
/// has its own test below: its arithmetic counts the other direction's ACKs.)
#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests installs it and runs this"]
fn many_streams_sum_to_the_shapers_arithmetic() {
    require_tool("many_streams_sum", "iperf3", "iperf3");
    let _l = lab_test("iperf3_serve_shaped_sums");
    let lab = lab("i3sums", Some("50mbit"));
    let ip = lab.layout().links[0].b.addr.to_string();
    let dir = scratch("iperf3-serve-sums");
    let expected = 50.0 * 1448.0 / 1514.0;
    // Six seconds: 128 flows' opening burst (1280 segments into a 312 KB queue) and the
    // losses it costs are a shorter share of the test (over -t 4 one idle run read -3.1%).
    let args = ["-P", "128", "-t", "6"];
    let sum = |j: &Value| {
        assert!(j.get("error").is_none(), "{}", j["error"]);
        j["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap()
            / 1e6
    };
    let cpu = netsweep_testkit::lab::idle::CpuWindow::start();
    let (theirs, ours) = against_both(&lab, &ip, &dir, &args);
    let busy = cpu.finish();
    let (theirs, ours) = (sum(&theirs), sum(&ours));
    eprintln!(
        "-P 128: iperf3 -c reads {ours:.2} Mbit/s from netsweep, {theirs:.2} from iperf3 -s \
         (arithmetic {expected:.2})"
    );
    // Within 3% of iperf3 -s when the machine was idle for both; on a busy one the two 6 s
    // tests drift apart (a full ./run-tests on a noisy host read 43.04 from netsweep and 41.28
    // from iperf3 -s, both far under the arithmetic's 47.82), so then within 25%.
    let tolerance = if busy.idle_enough() { 0.03 } else { 0.25 };
    assert!(
        (ours / theirs - 1.0).abs() < tolerance,
        "{ours:.2} Mbit/s from netsweep vs {theirs:.2} from iperf3 -s (within {:.0}%: {busy})",
        tolerance * 100.0
    );
    check_arithmetic_when_idle("-P 128", ours, expected, 0.03, &busy);
    drop(lab);
}

/// Counts every TCP packet `host` sends, and the bare ACKs among them (IP length ≤ 80: 20 +
/// 20 + up to 40 bytes of options), with nft in its output hook.
fn count_tcp_out(lab: &Lab, host: &str) {
    let rules = "table inet nsw_i3acks {\n counter sent {}\n counter acks {}\n chain output {\n  \
                 type filter hook output priority 0;\n  meta l4proto tcp counter name \"sent\"\n  \
                 meta l4proto tcp ip length <= 80 counter name \"acks\"\n }\n}\n";
    nft_into(lab, host, rules);
}

/// Loads an nft ruleset into `host`.
fn nft_into(lab: &Lab, host: &str, rules: &str) {
    nft_load(lab.command(host, &["nft", "-f", "-"]).unwrap(), rules);
}

/// The share of `host`'s TCP bytes on the wire (IP bytes + 14 of Ethernet header a frame, as
/// tbf counts them) that were not bare ACKs, since the counters were last reset; and resets
/// them.
fn data_share(lab: &Lab, host: &str) -> f64 {
    let read = |name: &str| {
        let argv = ["nft", "-j", "reset", "counter", "inet", "nsw_i3acks", name];
        let o = lab.command(host, &argv).unwrap().output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let (packets, bytes) =
            netsweep_lab::counters::parse_nft_counter(&text).expect("the nft counter");
        (bytes + 14 * packets) as f64
    };
    let (all, acks) = (read("sent"), read("acks"));
    assert!(all > 0.0, "{host} sent no TCP");
    (all - acks) / all
}

/// Issue 41 item 2 across the same 50 Mbit/s link: `-P 4 --bidir`, each direction's sum read
/// from Debian's client's own output (`sum_received`, `sum_received_bidir_reverse`), within 3%
/// of the shaper's arithmetic when the machine was idle — and always within 4% of what the same
/// client reads from `iperf3 -s` just before. With both directions loaded, each direction's
/// link also carries the other's ACKs (2–3% of its bytes here), so the arithmetic is 50 Mbit/s
/// × 1448/1514 × the share of the sender's wire bytes that were data, counted by nft in the
/// sender's output over the test: 46.7–47.0 Mbit/s here, not the 47.82 of a one-way test,
/// which both servers' figures fell short of by 2–6%. The first second (slow start) is
/// omitted (`-O 1`); six idle runs read −2.5% to +2.3% of it. Held: both directions together
/// within 3%, each within 4%.
#[test]
#[ignore = "needs root (lab namespaces) and iperf3: ./run-tests installs it and runs this"]
fn bidir_streams_sum_to_the_shapers_arithmetic_each_way() {
    require_tool("bidir_streams_sum", "iperf3", "iperf3");
    let _l = lab_test("iperf3_serve_shaped_bidir");
    let lab = lab("i3bidir", Some("50mbit"));
    let ip = lab.layout().links[0].b.addr.to_string();
    let dir = scratch("iperf3-serve-bidir");
    let args = ["-P", "4", "--bidir", "-t", "6", "-O", "1"];
    let sums = |j: &Value| {
        assert!(j.get("error").is_none(), "{}", j["error"]);
        let e = &j["end"];
        let mbps = |k: &str| e[k]["bits_per_second"].as_f64().unwrap() / 1e6;
        (mbps("sum_received"), mbps("sum_received_bidir_reverse"))
    };
    count_tcp_out(&lab, "client");
    count_tcp_out(&lab, "server");
    let (theirs, their_busy) = {
        let _t = iperf3_s_in(&lab, &ip);
        let cpu = netsweep_testkit::lab::idle::CpuWindow::start();
        let sums = sums(&client_in(&lab, &ip, &args));
        (sums, cpu.finish())
    };
    let _s = serve(&lab, &ip, &dir, &[]);
    // The counters start with netsweep's test.
    let _ = (data_share(&lab, "client"), data_share(&lab, "server"));
    let cpu = netsweep_testkit::lab::idle::CpuWindow::start();
    let ours = sums(&client_in(&lab, &ip, &args));
    let busy = cpu.finish();
    let frame = 50.0 * 1448.0 / 1514.0;
    let (up, down) = (
        frame * data_share(&lab, "client"),
        frame * data_share(&lab, "server"),
    );
    eprintln!(
        "-P 4 --bidir: iperf3 -c reads {:.2} up, {:.2} down from netsweep (arithmetic {up:.2}, \
         {down:.2}); {:.2} up, {:.2} down from iperf3 -s",
        ours.0, ours.1, theirs.0, theirs.1
    );
    // Against iperf3 -s, measured just before: within 4% when both tests had an idle
    // machine; a busy one moves the two 6 s tests apart (a full ./run-tests on a noisy host
    // read 35.15 up from netsweep and 40.26 from iperf3 -s, both far under the 47.10 of the
    // arithmetic), so then only within 25%: a server that moved much less still fails.
    let both_idle = busy.idle_enough() && their_busy.idle_enough();
    for (what, got, them) in [("up", ours.0, theirs.0), ("down", ours.1, theirs.1)] {
        let tolerance = if both_idle { 0.04 } else { 0.25 };
        assert!(
            (got / them - 1.0).abs() < tolerance,
            "-P 4 --bidir {what}: {got:.2} Mbit/s from netsweep vs {them:.2} from iperf3 -s \
             (within {:.0}%: {})",
            tolerance * 100.0,
            if both_idle {
                "both idle".to_string()
            } else {
                format!("ours: {busy}; theirs: {their_busy}")
            }
        );
    }
    // Both directions together within 3% of the two links' arithmetic; each direction within
    // 4%: a full ./run-tests read 45.17 up (−3.3%) and 47.48 down (+1.3%) on an idle machine,
    // −1.0% together (iperf3 -s just before: 46.57 and 46.88), where six runs by hand had
    // read −2.5% to +2.3% each way: how the two directions' streams share their links moves
    // by a few percent from one 6 s test to the next.
    check_arithmetic_when_idle(
        "-P 4 --bidir up and down",
        ours.0 + ours.1,
        up + down,
        0.03,
        &busy,
    );
    check_arithmetic_when_idle("-P 4 --bidir up", ours.0, up, 0.04, &busy);
    check_arithmetic_when_idle("-P 4 --bidir down", ours.1, down, 0.04, &busy);
    drop(lab);
}
