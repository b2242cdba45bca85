//! Issue 9 item 5 through the real binary on loopback: a crr transaction makes only the
//! system calls a plain client and server make (counted with strace, per connection), and a
//! crr run records the knobs the kernel granted, equal to what getsockopt says.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

fn ok(o: &std::process::Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// What the kernel grants for SO_SNDBUF or SO_RCVBUF `asked` on a fresh TCP socket: the
/// independent source the run's figures are compared against.
fn kernel_grant(opt: libc::c_int, asked: libc::c_int) -> u64 {
    // SAFETY: plain socket calls on a socket this function owns and closes.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let sz = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        assert_eq!(
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&asked as *const libc::c_int).cast(),
                sz
            ),
            0
        );
        let (mut v, mut len) = (0 as libc::c_int, sz);
        assert_eq!(
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&mut v as *mut libc::c_int).cast(),
                &mut len
            ),
            0
        );
        libc::close(fd);
        v as u64
    }
}

#[test]
fn crr_records_the_knobs_granted_on_its_connections() {
    let dir = scratch("crr-granted");
    let (o, v) = run_json(
        &dir.join("tcp.json"),
        &[
            "-t",
            "tcp",
            "-p",
            "crr",
            "--sizes",
            "1,100",
            "--sndbuf",
            "100000",
            "--rcvbuf",
            "90000",
            "--nodelay",
            "off",
            "--cc",
            "reno",
            "--tos",
            "0x10",
            "--priority",
            "3,4",
            "--cpu",
            "0",
        ],
    );
    ok(&o);
    let sndbuf = kernel_grant(libc::SO_SNDBUF, 100_000);
    let rcvbuf = kernel_grant(libc::SO_RCVBUF, 90_000);
    let check = |g: &Value, who: &str, priority: u64| {
        assert_eq!(g["sndbuf"].as_u64(), Some(sndbuf), "{who}: {g}");
        assert_eq!(g["rcvbuf"].as_u64(), Some(rcvbuf), "{who}: {g}");
        assert_eq!(g["nodelay"], false, "{who}: {g}");
        assert_eq!(g["congestion_control"], "reno", "{who}: {g}");
        assert_eq!(g["tos"], 0x10, "{who}: {g}");
        assert_eq!(g["priority"].as_u64(), Some(priority), "{who}: {g}");
    };
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        let g = &p["crr"]["granted"];
        check(g, &format!("point {}", p["size"]), 3);
        // Read on a connected socket: the route's MTU (loopback's) is known.
        assert!(g["path_mtu"].as_u64().unwrap() >= 1280, "{g}");
    }
    check(&v["granted"]["client"], "run, client", 3);
    assert_eq!(v["granted"]["client"]["cpu"], 0, "pinning survives");
    check(&v["granted"]["server"], "run, server", 4);

    // unix-stream: only the buffers apply; the rest is noted, never claimed.
    let (o, v) = run_json(
        &dir.join("unix.json"),
        &[
            "-t",
            "unix-stream",
            "-p",
            "crr",
            "--sizes",
            "8",
            "--sndbuf",
            "100000",
            "--tos",
            "8",
        ],
    );
    ok(&o);
    let g = &v["points"][0]["crr"]["granted"];
    assert_eq!(g["sndbuf"].as_u64(), Some(sndbuf), "{g}");
    assert!(g.get("tos").is_none_or(Value::is_null), "{g}");
    assert!(g["notes"].to_string().contains("tos does not apply"), "{g}");
    assert_eq!(v["granted"]["server"]["sndbuf"].as_u64(), Some(sndbuf));
}

/// One traced system call: name, first argument, return value.
struct Call {
    name: String,
    arg0: String,
    ret: String,
    line: String,
}

fn parse(line: &str) -> Option<Call> {
    // Debug builds of std check that a descriptor is open before closing it; release
    // builds do not make the call.
    if line.starts_with("fcntl(") && line.contains("F_GETFD)") {
        return None;
    }
    let open = line.find('(')?;
    let name = &line[..open];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let rest = &line[open + 1..];
    let arg0 = rest
        .split([',', ')'])
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let ret = line
        .rsplit(" = ")
        .next()?
        .split_whitespace()
        .next()?
        .to_string();
    Some(Call {
        name: name.into(),
        arg0,
        ret,
        line: line.into(),
    })
}

/// One descriptor's life in a thread: every call the thread made from its opening to its
/// close, the opening line, and whether the descriptor itself was connected (a listener's
/// window also holds the connects the thread made on other sockets while it was open: CI
/// once saw the in-process server close its listener before exit, and the control
/// connection after it was then taken for a data connection).
struct Window {
    names: Vec<String>,
    first: String,
    connected: bool,
}

/// In one thread's calls, the window of every descriptor a successful `opener` call returned
/// and the thread closed, in opening order.
fn windows(calls: &[Call], opener: &str) -> Vec<Window> {
    // (opened at, the window) by descriptor; the result in opening order.
    let mut out = Vec::new();
    let mut open: BTreeMap<String, (usize, Window)> = BTreeMap::new();
    for (i, c) in calls.iter().enumerate() {
        for (_, w) in open.values_mut() {
            w.names.push(c.name.clone());
        }
        if c.name == "connect" {
            if let Some((_, w)) = open.get_mut(&c.arg0) {
                w.connected = true;
            }
        }
        if c.name == "close" {
            if let Some(w) = open.remove(&c.arg0) {
                out.push(w);
            }
        }
        if c.name == opener && c.ret.parse::<i32>().is_ok_and(|r| r >= 0) {
            let w = Window {
                names: vec![c.name.clone()],
                first: c.line.clone(),
                connected: false,
            };
            open.insert(c.ret.clone(), (i, w));
        }
    }
    out.sort_by_key(|w| w.0);
    out.into_iter().map(|(_, w)| w).collect()
}

/// The case CI met: a listener closed before exit, after the control connection it saw made.
#[test]
fn only_a_socket_that_was_itself_connected_is_a_connection() {
    let trace = "socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_IP) = 3
listen(3, 128)                          = 0
socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_IP) = 4
connect(4, {sa_family=AF_INET, sin_port=htons(41307)}, 16) = 0
sendto(4, \"x\", 1, 0, NULL, 0) = 1
close(4)                                = 0
close(3)                                = 0";
    let calls: Vec<Call> = trace.lines().filter_map(parse).collect();
    let w = windows(&calls, "socket");
    // In opening order: the listener (which saw a connect, not its own), then the connection.
    assert_eq!(
        w.iter().map(|w| w.connected).collect::<Vec<_>>(),
        [false, true]
    );
    assert!(w[0].names.iter().any(|n| n == "connect"));
    assert_eq!(w[1].names, ["socket", "connect", "sendto", "close"]);
}

#[test]
#[ignore = "needs strace: ./run-tests installs it (as root) and runs this"]
fn crr_transactions_make_only_the_calls_a_plain_client_and_server_make() {
    assert!(
        Command::new("strace").arg("-V").output().is_ok(),
        "strace not installed: apt-get install strace"
    );
    let dir = scratch("crr-strace");
    let prefix = dir.join("trace");
    let out = dir.join("r.json");
    let o = Command::new("strace")
        .args(["-ff", "-qq", "-o"])
        .arg(&prefix)
        .arg(bin())
        .args(["run", "--no-save", "-q", "-o"])
        .arg(&out)
        .args(QUICK)
        .args(["-t", "tcp", "-p", "crr", "--sizes", "1,64"])
        .output()
        .expect("strace runs");
    ok(&o);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let points = v["points"].as_array().unwrap().len();
    let timed: u64 = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["crr"]["connections"].as_u64().unwrap())
        .sum();
    let mut client = BTreeMap::<Vec<String>, usize>::new();
    let mut server = BTreeMap::<Vec<String>, usize>::new();
    let (mut client_conns, mut server_conns) = (0usize, 0usize);
    for f in std::fs::read_dir(&dir).unwrap() {
        let path = f.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("trace.")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let calls: Vec<Call> = text.lines().filter_map(parse).collect();
        // The client's data connections: every connected TCP socket but the control one
        // (the first), in the thread that runs the trials.
        let conns: Vec<_> = windows(&calls, "socket")
            .into_iter()
            .filter(|w| w.first.contains("SOCK_STREAM") && w.connected)
            .collect();
        if conns.len() > 1 {
            for w in conns.into_iter().skip(1) {
                client_conns += 1;
                *client.entry(w.names).or_default() += 1;
            }
        }
        for w in windows(&calls, "accept4") {
            server_conns += 1;
            *server.entry(w.names).or_default() += 1;
        }
    }
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    // socket, TCP_NODELAY (netsweep's default), SO_SNDTIMEO, SO_RCVTIMEO, connect,
    // request, response, close — nothing else.
    let plain = s(&[
        "socket",
        "setsockopt",
        "setsockopt",
        "setsockopt",
        "connect",
        "sendto",
        "recvfrom",
        "close",
    ]);
    let readback = client
        .iter()
        .filter(|(k, _)| **k != plain)
        .map(|(k, n)| (k.clone(), *n))
        .collect::<Vec<_>>();
    assert!(
        client_conns as u64 > timed,
        "every timed connection was traced ({client_conns} of {timed})"
    );
    // The first connection of each point also reads the knobs back (getsockopt only,
    // between the response and the close, in a warm-up trial).
    assert!(
        readback.iter().map(|(_, n)| n).sum::<usize>() <= points,
        "only the first connection of each point may differ: {readback:?}"
    );
    for (k, _) in &readback {
        let extra: Vec<_> = k.iter().filter(|n| *n == "getsockopt").collect();
        let rest: Vec<_> = k.iter().filter(|n| *n != "getsockopt").cloned().collect();
        assert!(
            !extra.is_empty() && rest == plain,
            "a connection made {k:?}"
        );
    }
    // Server: accept, request, response, the client's close, close.
    let plain_server = s(&["accept4", "recvfrom", "sendto", "recvfrom", "close"]);
    assert_eq!(
        server.get(&plain_server).copied(),
        Some(server_conns),
        "every accepted connection: {server:?}"
    );
    assert_eq!(
        server_conns, client_conns,
        "the server served every connection"
    );
}

/// MPTCP's accept ignores SO_RCVTIMEO: the server must still notice the end of a trial
/// (it polls), so a crr run over mptcp finishes with every connection served.
#[test]
fn crr_over_mptcp_finishes() {
    // MPTCP exists on every machine of this kind (conformance.rs requires it too).
    let probe = run(&["list"]);
    assert!(
        String::from_utf8_lossy(&probe.stdout)
            .lines()
            .any(|l| l.contains("mptcp") && !l.contains("unavailable") && !l.contains("no ")),
        "MPTCP is unavailable here: sysctl net.mptcp.enabled=1"
    );
    let dir = scratch("crr-mptcp");
    let out = dir.join("m.json");
    let mut child = Command::new(bin())
        .args(["run", "--no-save", "-q", "-o"])
        .arg(&out)
        .args(QUICK)
        .args(["-t", "mptcp", "-p", "crr", "--sizes", "1,64"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a crr run over mptcp hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for p in v["points"].as_array().unwrap() {
        let c = &p["crr"];
        assert!(c["connections"].as_u64().unwrap() > 0);
        assert_eq!(c["connections"], c["server_accepted"]);
    }
}
