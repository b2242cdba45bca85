//! Shared helpers of the lab's root tests: the require-root-and-lock preamble, reading back
//! addresses and MTUs with `ip -j`, ping, UDP traffic from inside a namespace, the fake
//! netsweep binary. Every root test is `#[ignore]`d: without root the harness reports it
//! ignored; `./run-tests` as root runs it (`--include-ignored`).
#![allow(dead_code, unused_imports)]

use netsweep_lab::Lab;
use netsweep_testkit::lab::{self, LabTestLock};
pub use netsweep_testkit::wait_for;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The machine-wide lab test lock; panics with the fix when this process cannot build labs
/// (every caller is `#[ignore = "needs root …"]`, so that only happens when asked to run).
pub fn setup(test: &str) -> LabTestLock {
    lab::lab_test(test)
}

/// `ip -j <args>` inside `host`'s namespace, parsed.
pub fn ip_json(lab: &Lab, host: &str, args: &[&str]) -> serde_json::Value {
    let ns = lab.netns(host).unwrap();
    let mut full = vec!["-n", ns, "-j"];
    full.extend_from_slice(args);
    let out = std::process::Command::new(netsweep_lab::cmd::find_tool("ip").unwrap())
        .args(&full)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ip {full:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// (MTU, ["addr/prefix", …]) of `iface` in `host`, as the kernel reports them.
pub fn iface_state(lab: &Lab, host: &str, iface: &str) -> (u64, Vec<String>) {
    let v = ip_json(lab, host, &["addr", "show", "dev", iface]);
    let i = &v[0];
    let mtu = i["mtu"].as_u64().unwrap();
    let addrs = i["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["scope"] == "global")
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
        .collect();
    (mtu, addrs)
}

/// One ping from `host` to `addr`, 1 s timeout.
pub fn ping(lab: &Lab, host: &str, addr: &str) -> bool {
    let mut c = lab
        .command(host, &["ping", "-c", "1", "-W", "1", addr])
        .unwrap();
    c.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c.status().map(|s| s.success()).unwrap_or(false)
}

/// Makes sure `ping` exists (installs iputils-ping when missing).
pub fn ensure_ping() {
    if netsweep_lab::cmd::find_tool("ping").is_none() {
        let _ = std::process::Command::new("apt-get")
            .args(["install", "-y", "iputils-ping"])
            .status();
    }
    assert!(
        netsweep_lab::cmd::find_tool("ping").is_some(),
        "ping is missing: apt-get install iputils-ping"
    );
}

/// A UDP socket bound to `bind` inside `host`'s namespace, with a large receive buffer.
pub fn udp_socket_in(lab: &Lab, host: &str, bind: SocketAddr) -> UdpSocket {
    lab.in_host(host, move || {
        let s = UdpSocket::bind(bind).unwrap();
        let size: libc::c_int = 8 << 20;
        // SAFETY: setsockopt with a pointer to a live c_int of the given length.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &size as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        s
    })
    .unwrap()
}

/// Sets SO_PRIORITY on a socket.
pub fn set_priority(s: &UdpSocket, prio: u32) {
    let p = prio as libc::c_int;
    // SAFETY: setsockopt with a pointer to a live c_int of the given length.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            &p as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "SO_PRIORITY: {}", std::io::Error::last_os_error());
}

/// Sends `count` datagrams of `size` bytes from `host` to `to`, with SO_PRIORITY `prio` when
/// given, pausing every 100 datagrams so no queue overflows. Returns how many were sent.
pub fn send_udp(
    lab: &Lab,
    host: &str,
    to: SocketAddr,
    count: usize,
    size: usize,
    prio: Option<u32>,
) -> usize {
    let s = lab
        .in_host(host, || UdpSocket::bind("0.0.0.0:0").unwrap())
        .unwrap();
    if let Some(p) = prio {
        set_priority(&s, p);
    }
    let buf = vec![0x5au8; size];
    let mut sent = 0;
    for i in 0..count {
        if s.send_to(&buf, to).is_ok() {
            sent += 1;
        }
        if i % 100 == 99 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    sent
}

/// Receives datagrams until none arrive for `idle`; returns the count.
pub fn drain(s: &UdpSocket, idle: Duration) -> usize {
    s.set_read_timeout(Some(idle)).unwrap();
    let mut buf = [0u8; 65536];
    let mut n = 0;
    while s.recv(&mut buf).is_ok() {
        n += 1;
    }
    n
}

/// Names of `nsw-` namespaces, root-namespace links and nft tables that exist now.
pub fn leftovers() -> Vec<String> {
    let mut out = Vec::new();
    let ns = std::process::Command::new(netsweep_lab::cmd::find_tool("ip").unwrap())
        .args(["netns", "list"])
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&ns.stdout).lines() {
        if l.starts_with("nsw-") {
            out.push(format!("netns {l}"));
        }
    }
    let links = std::process::Command::new(netsweep_lab::cmd::find_tool("ip").unwrap())
        .args(["-br", "link"])
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&links.stdout).lines() {
        if l.starts_with("nsw-") {
            out.push(format!("link {l}"));
        }
    }
    let tables = std::process::Command::new(netsweep_lab::cmd::find_tool("nft").unwrap())
        .args(["list", "tables"])
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&tables.stdout).lines() {
        if l.contains(" nsw-") {
            out.push(l.to_string());
        }
    }
    out
}

/// Namespaces of run `run_id` that still exist.
pub fn namespaces_of(run_id: &str) -> Vec<String> {
    let prefix = format!("nsw-{run_id}-");
    leftovers()
        .into_iter()
        .filter_map(|l| l.strip_prefix("netns ").map(str::to_string))
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// The fake netsweep binary (examples/fake_netsweep.rs): ./run-tests builds it with every
/// target; run alone, a test builds it on demand (~30 s the first time, holding the lab lock).
pub fn fake_exe() -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let target_dir = me.parent().and_then(|p| p.parent()).unwrap().to_path_buf();
    let exe = target_dir.join("examples").join("fake_netsweep");
    if !exe.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = std::process::Command::new(cargo)
            .args(["build", "-p", "netsweep-lab", "--example", "fake_netsweep"])
            .status()
            .unwrap();
        assert!(st.success(), "building the fake netsweep failed");
    }
    assert!(exe.exists(), "{} missing", exe.display());
    exe
}
