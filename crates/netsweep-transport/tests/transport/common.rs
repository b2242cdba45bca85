//! Test harness: endpoint pairs made through the real `TransportFactory`, the real pattern
//! loops driving them in two threads, and network namespaces (`nsw-…`, 198.18.0.0/15 only)
//! removed by Drop guards.
#![allow(dead_code, unused_imports)]

use netsweep_endpoint::{DataListener, Endpoint, MessageBuffer, Slots, TransportFactory};
use netsweep_engine::pattern::dgram::DgramAccount;
use netsweep_engine::pattern::intervals::Intervals;
use netsweep_engine::pattern::pingpong::{self, ClientTrial};
use netsweep_engine::pattern::{echo, stream, TrialSignals, SLICE};
use netsweep_model::spec::{Api, Pattern, Transport};
use netsweep_model::stats::LatencyHistogram;
use netsweep_proto::messages::{Knobs, SessionSetup, SideCounters};
use netsweep_transport::Registry;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

pub const TIMEOUT: Duration = Duration::from_secs(5);

use netsweep_testkit::lab::LabTestLock;
pub use netsweep_testkit::{is_root, require_root};

/// [`require_root`], then the machine-wide lab test lock (held until dropped): tests here
/// that make `nsw-` namespaces must not run while another test's `lab clean` removes every
/// `nsw-` object.
pub fn root_test(test: &str) -> LabTestLock {
    require_root(test);
    netsweep_testkit::lab::lock()
        .unwrap_or_else(|e| panic!("{test}: {}: {e}", netsweep_testkit::lab::LOCK_FILE))
}

pub fn setup(
    t: Transport,
    api: Api,
    pattern: Pattern,
    max_size: u64,
    server: &Knobs,
) -> SessionSetup {
    SessionSetup {
        transport: t.name().into(),
        api: api.name().into(),
        pattern: pattern.name().into(),
        family: if netsweep_transport::descriptor(t).is_ip() {
            "ipv4"
        } else {
            "unix"
        }
        .into(),
        max_size,
        server_knobs: server.clone(),
        timeout_ns: TIMEOUT.as_nanos() as u64,
        ..Default::default()
    }
}

pub fn cookie() -> u64 {
    netsweep_endpoint::random_u64().expect("random bytes")
}

/// Opens a listener on `ip` (optionally inside namespace `sns`) for a client at `client_ip`,
/// connects that client (inside `cns`).
pub fn pair_in(
    s: &SessionSetup,
    client: &Knobs,
    ip: IpAddr,
    client_ip: IpAddr,
    sns: Option<&str>,
    cns: Option<&str>,
) -> io::Result<(Box<dyn Endpoint>, Box<dyn Endpoint>)> {
    let s1 = s.clone();
    let mut l: Box<dyn DataListener> = in_ns(sns, move || Registry.listen(&s1, ip, client_ip))?;
    let data = l.endpoint();
    let c = cookie();
    let h = thread::spawn(move || l.accept(c, TIMEOUT));
    let (s2, k) = (s.clone(), client.clone());
    let ce = in_ns(cns, move || {
        Registry.connect(&s2, &k, ip, &data, c, TIMEOUT)
    });
    let se = h
        .join()
        .map_err(|_| io::Error::other("accept thread panicked"))?;
    Ok((ce?, se?))
}

pub fn pair(
    s: &SessionSetup,
    client: &Knobs,
) -> io::Result<(Box<dyn Endpoint>, Box<dyn Endpoint>)> {
    let lo = IpAddr::from([127, 0, 0, 1]);
    pair_in(s, client, lo, lo, None, None)
}

/// Runs `reps` verified round trips of `size` bytes; returns (client, server) figures.
pub fn pingpong(
    c: &mut Box<dyn Endpoint>,
    s: Box<dyn Endpoint>,
    size: usize,
    reps: u64,
    first_seq: u64,
) -> io::Result<(ClientTrial, SideCounters, Box<dyn Endpoint>)> {
    let signals = Arc::new(TrialSignals::default());
    let sig = signals.clone();
    let max = size.max(1);
    let server = thread::spawn(move || {
        let mut s = s;
        let slot = max.max(64 * 1024) + 1;
        let mut buf = MessageBuffer::new(slot, 0);
        s.prepare(slot, 1)?;
        s.set_recv_timeout(Some(SLICE))?;
        let mut slots = Slots::new(buf.as_mut(), slot, slot);
        let r = echo::server_trial(s.as_mut(), &mut slots, size, reps, &sig, TIMEOUT, None);
        r.map(|c| (c, s))
    });
    let datagram = c.is_datagram();
    let mut tx = MessageBuffer::new(size, 0);
    let mut rx = MessageBuffer::new(size + usize::from(datagram), 0);
    c.prepare(size, 1)?;
    c.set_recv_timeout(Some(if datagram {
        Duration::from_millis(500)
    } else {
        TIMEOUT
    }))?;
    let mut hist = LatencyHistogram::new();
    let rlen = size + usize::from(datagram);
    let mut txs = Slots::new(tx.as_mut(), size, size);
    let mut rxs = Slots::new(rx.as_mut(), rlen, rlen);
    let r = pingpong::client_trial(
        c.as_mut(),
        &mut txs,
        &mut rxs,
        first_seq,
        reps,
        &mut hist,
        pingpong::Checks {
            verify: true,
            one_way: false,
        },
    );
    let ct = r.as_ref().map(|t| t.counters.clone()).unwrap_or_default();
    signals.end(ct.bytes_sent, ct.messages_sent);
    let srv = server
        .join()
        .map_err(|_| io::Error::other("server thread panicked"))?;
    let t = r?;
    let (sc, s) = srv?;
    Ok((t, sc, s))
}

/// Streams `size`-byte messages for `dur`, `batch` per call; returns (sender, receiver).
pub fn stream(
    c: &mut Box<dyn Endpoint>,
    s: Box<dyn Endpoint>,
    size: usize,
    batch: usize,
    dur: Duration,
) -> io::Result<(SideCounters, SideCounters, Box<dyn Endpoint>)> {
    let signals = Arc::new(TrialSignals::default());
    let sig = signals.clone();
    let trial_cookie = 0x5eed_1234u32;
    let server = thread::spawn(move || {
        let mut s = s;
        let slot = size.max(64 * 1024) + 1;
        let mut buf = MessageBuffer::new(slot * batch, 0);
        let mut lens = vec![0usize; batch];
        s.prepare(slot, batch)?;
        s.set_recv_timeout(Some(SLICE))?;
        let mut account = DgramAccount::new(trial_cookie);
        let mut iv = Intervals::default();
        iv.arm_receiver(INTERVAL_NS, dur.as_nanos() as u64, 100_000_000);
        let r = stream::receiver_trial(
            s.as_mut(),
            buf.as_mut(),
            slot,
            &mut lens,
            &sig,
            TIMEOUT,
            &mut account,
            std::time::Instant::now(),
            &mut iv,
        );
        r.map(|c| (c, s))
    });
    let mut tx = MessageBuffer::new(size * batch, 0);
    c.prepare(size, batch)?;
    let mut iv = Intervals::default();
    iv.arm(INTERVAL_NS, dur.as_nanos() as u64);
    let r = stream::sender_trial(
        c.as_mut(),
        tx.as_mut(),
        size,
        batch,
        dur,
        trial_cookie,
        &mut iv,
        &AtomicBool::new(false),
    );
    let sent = r.as_ref().map(|c| c.clone()).unwrap_or_default();
    signals.end(sent.bytes_sent, sent.messages_sent);
    if r.is_err() {
        signals.abort.store(true, Ordering::SeqCst);
    }
    let srv = server
        .join()
        .map_err(|_| io::Error::other("server thread panicked"))?;
    let sent = r?;
    let (rc, s) = srv?;
    check_intervals(&sent, &rc);
    Ok((sent, rc, s))
}

/// The timeline interval every stream of these tests keeps.
const INTERVAL_NS: u64 = 10_000_000;

/// Both sides' per-interval counts add up to their totals: bytes on both sides, datagrams
/// received by send time on the receiver.
fn check_intervals(tx: &SideCounters, rx: &SideCounters) {
    let sum = |c: &SideCounters| -> (u64, u64) {
        c.intervals
            .iter()
            .fold((0, 0), |(b, m), i| (b + i.bytes, m + i.messages))
    };
    assert_eq!(
        sum(tx),
        (tx.bytes_sent, tx.messages_sent),
        "sender's intervals"
    );
    let (bytes, messages) = sum(rx);
    assert_eq!(bytes, rx.bytes_received, "receiver's intervals");
    if let Some(d) = &rx.datagrams {
        assert_eq!(messages, d.received, "receiver's datagrams by send time");
    }
}

/// Runs `f` on a thread inside network namespace `ns` (None: this one).
pub fn in_ns<T: Send + 'static>(
    ns: Option<&str>,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let path = ns.map(|n| format!("/var/run/netns/{n}"));
    thread::spawn(move || {
        if let Some(p) = path {
            let f = std::fs::File::open(&p)?;
            // SAFETY: setns on this thread only, with an open netns descriptor.
            if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        f()
    })
    .join()
    .map_err(|_| io::Error::other("namespace thread panicked"))?
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A network namespace named `nsw-…`, deleted on drop.
#[derive(Debug)]
pub struct Netns(pub String);

impl Netns {
    pub fn new() -> io::Result<Self> {
        let n = format!(
            "nsw-tt{}-{}",
            std::process::id() % 100_000,
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        ip(&["netns", "add", &n])?;
        let ns = Self(n);
        ip(&["-n", &ns.0, "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

/// Two namespaces joined by a veth pair: a = 198.18.<k>.1/24, b = 198.18.<k>.2/24.
#[derive(Debug)]
pub struct Veth {
    pub a: Netns,
    pub b: Netns,
    pub ip_a: IpAddr,
    pub ip_b: IpAddr,
    pub if_a: String,
    pub if_b: String,
}

impl Veth {
    pub fn new(mtu: u32) -> io::Result<Self> {
        let a = Netns::new()?;
        let b = Netns::new()?;
        let k = SEQ.fetch_add(1, Ordering::SeqCst) % 250 + 1;
        let tag = format!("{}{k}", std::process::id() % 10_000);
        let (if_a, if_b) = (format!("nswa{tag}"), format!("nswb{tag}"));
        ip(&[
            "link",
            "add",
            &if_a,
            "netns",
            &a.0,
            "mtu",
            &mtu.to_string(),
            "type",
            "veth",
            "peer",
            "name",
            &if_b,
            "netns",
            &b.0,
            "mtu",
            &mtu.to_string(),
        ])?;
        let (ip_a, ip_b) = (format!("198.18.{k}.1"), format!("198.18.{k}.2"));
        ip(&[
            "-n",
            &a.0,
            "addr",
            "add",
            &format!("{ip_a}/24"),
            "dev",
            &if_a,
        ])?;
        ip(&[
            "-n",
            &b.0,
            "addr",
            "add",
            &format!("{ip_b}/24"),
            "dev",
            &if_b,
        ])?;
        ip(&["-n", &a.0, "link", "set", &if_a, "up"])?;
        ip(&["-n", &b.0, "link", "set", &if_b, "up"])?;
        let v = Self {
            a,
            b,
            ip_a: ip_a.parse().map_err(io::Error::other)?,
            ip_b: ip_b.parse().map_err(io::Error::other)?,
            if_a,
            if_b,
        };
        // Wait until IPv4 on the link is usable (no DAD for IPv4; link up is quick).
        thread::sleep(Duration::from_millis(50));
        Ok(v)
    }
}

/// Runs `cmd args…` inside namespace `ns`, feeding `stdin`; returns stdout.
pub fn ns_exec(ns: &str, cmd: &[&str], stdin: Option<&str>) -> io::Result<String> {
    use std::io::Write;
    use std::process::Stdio;
    let mut c = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut input = c.stdin.take().ok_or_else(|| io::Error::other("no stdin"))?;
    input.write_all(stdin.unwrap_or("").as_bytes())?;
    drop(input);
    let out = c.wait_with_output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{}: {} (apt-get install nftables iproute2)",
            cmd.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// nft match for the `packet` transport's client→server data frames (EtherType 0x88B5, kind
/// 1 in the byte after the session tag), never its hello frames.
pub const PACKET_DATA: &str = "ether type 0x88b5 @nh,32,8 1";

/// A known number of induced drops: an nft `netdev` table in `ns` dropping every `every`-th
/// frame matching `matcher` that arrives on `iface`, counting each (the same rule as
/// netsweep_testkit::lab::InducedDrops). Removed on drop.
#[derive(Debug)]
pub struct InducedDrops {
    ns: String,
    table: String,
}

impl InducedDrops {
    pub fn install(ns: &str, iface: &str, matcher: &str, every: u32) -> io::Result<Self> {
        let table = format!("nsw-drops-{iface}");
        let script = format!(
            "table netdev {table} {{\n\tcounter drops {{ }}\n\tchain ingress {{\n\t\t\
             type filter hook ingress device \"{iface}\" priority -500; policy accept;\n\t\t\
             {matcher} numgen inc mod {every} == {} counter name \"drops\" drop\n\t}}\n}}\n",
            every - 1
        );
        ns_exec(ns, &["nft", "-f", "-"], Some(&script))?;
        Ok(Self {
            ns: ns.into(),
            table,
        })
    }

    /// Frames dropped so far.
    pub fn dropped(&self) -> io::Result<u64> {
        let out = ns_exec(
            &self.ns,
            &[
                "nft",
                "-j",
                "list",
                "counter",
                "netdev",
                &self.table,
                "drops",
            ],
            None,
        )?;
        // {"nftables": [{"metainfo": …}, {"counter": {…, "packets": N, "bytes": M}}]}
        let at = out
            .find("\"packets\":")
            .ok_or_else(|| io::Error::other(format!("no packet count in {out}")))?;
        out[at + 10..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| io::Error::other(format!("bad packet count in {out}")))
    }
}

impl Drop for InducedDrops {
    fn drop(&mut self) {
        let _ = ns_exec(
            &self.ns,
            &["nft", "delete", "table", "netdev", &self.table],
            None,
        );
    }
}

/// Frames the kernel dropped at packet sockets in namespace `ns` (a full receive buffer):
/// the sum of `d` in `ss -0 -a -m` skmem, the sockets' sk_drops, counted by the kernel
/// independently of netsweep.
pub fn packet_socket_drops(ns: &str) -> io::Result<u64> {
    let out = ns_exec(ns, &["ss", "-0", "-a", "-m", "-n"], None)?;
    Ok(out
        .split("skmem:(")
        .skip(1)
        .filter_map(|s| {
            let fields = s.split(')').next()?;
            fields
                .split(',')
                .find_map(|f| f.strip_prefix('d'))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum())
}
