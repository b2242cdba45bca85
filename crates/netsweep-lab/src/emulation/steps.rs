//! Building a lab's path emulators: the namespace and veth pairs an emulated link is made of,
//! the emulator process it starts, netem's qdiscs where the kernel has netem, and the choice
//! between the two.

use super::{EmulatorLayout, Engine};
use netsweep_emu::config::{DirectionSpec, JitterDist, Loss};

/// The binary that runs `lab emulate` (this one, unless a test set another).
static EXE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Names the netsweep binary labs start their emulators with (tests, whose own executable is
/// not netsweep); the first call wins. By default, the running executable.
pub fn set_emulator_exe(path: impl Into<std::path::PathBuf>) {
    let _ = EXE.set(path.into());
}

fn emulator_exe() -> std::io::Result<std::path::PathBuf> {
    match EXE.get() {
        Some(p) => Ok(p.clone()),
        None => std::env::current_exe(),
    }
}

/// Starts the emulator of `em` (netsweep engine): writes its configuration, starts
/// `netsweep lab emulate` in its namespace as a process of its own session (it outlives
/// `lab up`; `lab down` ends it with the namespace), and waits until it reports.
pub(crate) fn start(em: &EmulatorLayout) -> crate::error::Result<()> {
    use crate::error::LabError;
    use std::os::unix::process::CommandExt;
    let io = |what: &str, e: std::io::Error| {
        LabError::io(format!("{what} for link {}", em.config.link), e)
    };
    std::fs::create_dir_all(&em.dir).map_err(|e| io("creating the emulator's directory", e))?;
    let cfg = serde_json::to_vec_pretty(&em.config).map_err(|e| {
        io(
            "encoding the emulator's configuration",
            std::io::Error::other(e),
        )
    })?;
    std::fs::write(em.config_path(), cfg)
        .map_err(|e| io("writing the emulator's configuration", e))?;
    let _ = std::fs::remove_file(em.report_path());
    let log =
        std::fs::File::create(em.log_path()).map_err(|e| io("creating the emulator's log", e))?;
    let exe = emulator_exe().map_err(|e| io("finding the netsweep binary", e))?;
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", &em.netns])
        .arg(&exe)
        .args(["lab", "emulate", "--config"])
        .arg(em.config_path())
        .arg("--report")
        .arg(em.report_path())
        .stdin(std::process::Stdio::null())
        .stdout(
            log.try_clone()
                .map_err(|e| io("opening the emulator's log", e))?,
        )
        .stderr(log);
    // SAFETY: setsid(2) is async-signal-safe; the child leaves our session so that it
    // outlives us and no terminal signal meant for us reaches it.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = c.spawn().map_err(|e| io("starting the path emulator", e))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if em.report().is_ok() {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            let log = std::fs::read_to_string(em.log_path()).unwrap_or_default();
            return Err(LabError::Usage(format!(
                "the path emulator of link {} exited ({st}): {}",
                em.config.link,
                log.trim()
            )));
        }
        if std::time::Instant::now() >= deadline {
            return Err(LabError::Usage(format!(
                "the path emulator of link {} did not start within 10 s; see {}",
                em.config.link,
                em.log_path().display()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The steps that build emulated link `l` through its emulator's namespace (the hosts'
/// addresses and offloads follow as for any link): the namespace (no IPv6, so its ports stay
/// silent), the two veth pairs, and segmentation, receive and checksum offloads off on all
/// four ends, so that every frame the emulator sees is one on the wire, checksummed.
pub(crate) fn link_steps(
    l: &crate::layout::LinkLayout,
    em: &EmulatorLayout,
    na: &str,
    nb: &str,
) -> Vec<crate::build::Step> {
    use crate::build::{exe, sysctl, tool, v};
    let ne = em.netns.as_str();
    let mtu = l.mtu.to_string();
    let mut out = vec![
        tool(
            format!("creating the emulator namespace of link {}", l.name),
            "ip",
            v(&["netns", "add", ne]),
        ),
        tool(
            format!("bringing up loopback in the emulator of link {}", l.name),
            "ip",
            v(&["-n", ne, "link", "set", "lo", "up"]),
        ),
    ];
    for key in [
        "net/ipv6/conf/all/disable_ipv6",
        "net/ipv6/conf/default/disable_ipv6",
    ] {
        out.push(sysctl(
            &format!("turning IPv6 off in the emulator of link {}", l.name),
            ne,
            key,
            "1",
        ));
    }
    for (host_if, host_ns, port) in [
        (&l.a.iface, na, &em.ports[0]),
        (&l.b.iface, nb, &em.ports[1]),
    ] {
        out.push(tool(
            format!("creating link {} (to its emulator)", l.name),
            "ip",
            v(&[
                "link", "add", "name", host_if, "netns", host_ns, "mtu", &mtu, "type", "veth",
                "peer", "name", port, "netns", ne, "mtu", &mtu,
            ]),
        ));
        for (ns, dev) in [(host_ns, host_if), (ne, port)] {
            out.push(tool(
                format!(
                    "turning segmentation offloads off on link {} in {ns}",
                    l.name
                ),
                "ip",
                v(&[
                    "netns",
                    "exec",
                    ns,
                    &exe("ethtool"),
                    "-K",
                    dev,
                    "tso",
                    "off",
                    "gso",
                    "off",
                    "gro",
                    "off",
                    // Checksums too: a frame a host leaves to the device to checksum crosses a
                    // veth unchecksummed, and the emulator's packet socket would carry it so.
                    "tx",
                    "off",
                ]),
            ));
        }
        out.push(tool(
            format!("bringing up the emulator port {port}"),
            "ip",
            v(&["-n", ne, "link", "set", port, "up"]),
        ));
    }
    out
}

/// netem's arguments for one direction of `spec` on a link of `mtu`.
pub(crate) fn netem_args(spec: &DirectionSpec, mtu: u32) -> Vec<String> {
    let mut a: Vec<String> = vec!["netem".into()];
    let ns = |n: u64| format!("{n}ns");
    a.extend(["delay".into(), ns(spec.delay_ns)]);
    if let Some(j) = spec.jitter {
        a.push(ns(j.ns));
        a.push("distribution".into());
        a.push(
            match j.dist {
                JitterDist::Uniform => "uniform",
                JitterDist::Normal => "normal",
                JitterDist::Paretonormal => "paretonormal",
            }
            .into(),
        );
    }
    match spec.loss {
        Loss::None => {}
        Loss::Random { p } => a.extend(["loss".into(), "random".into(), format!("{}%", p * 100.0)]),
        Loss::Gilbert { p, r, h, k } => a.extend([
            "loss".into(),
            "gemodel".into(),
            format!("{}%", p * 100.0),
            format!("{}%", r * 100.0),
            format!("{}%", (1.0 - h) * 100.0),
            format!("{}%", k * 100.0),
        ]),
    }
    if spec.duplicate > 0.0 {
        a.extend(["duplicate".into(), format!("{}%", spec.duplicate * 100.0)]);
    }
    if spec.reorder > 0.0 {
        a.extend(["reorder".into(), format!("{}%", spec.reorder * 100.0)]);
    }
    if let Some(r) = spec.rate_bps {
        a.extend(["rate".into(), format!("{r}bit")]);
    }
    let frames = spec
        .queue_frames
        .map(u64::from)
        .unwrap_or_else(|| (spec.queue_limit_bytes() / u64::from(mtu.max(1))).clamp(1, 1 << 20));
    a.extend(["limit".into(), frames.to_string()]);
    a
}

/// netem qdiscs on the hosts' egress of link `l`, for the directions emulated.
pub(crate) fn netem_steps(
    l: &crate::layout::LinkLayout,
    em: &EmulatorLayout,
    na: &str,
    nb: &str,
) -> Vec<crate::build::Step> {
    use crate::build::{tool, v};
    let mut out = Vec::new();
    for (i, (end, ns)) in [(&l.a, na), (&l.b, nb)].into_iter().enumerate() {
        let d = &em.config.directions[i];
        if d.is_passthrough() {
            continue;
        }
        let mut args = v(&["-n", ns, "qdisc", "add", "dev", &end.iface, "root"]);
        args.extend(netem_args(d, l.mtu));
        out.push(tool(
            format!("emulating link {} from {} (netem)", l.name, end.host),
            "tc",
            args,
        ));
    }
    out
}

/// Whether this kernel has netem: a netem qdisc on the loopback of a scratch namespace.
pub fn netem_available() -> bool {
    let ns = format!("{}netem-probe-{}", crate::names::PREFIX, std::process::id());
    let run = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !run(&["netns", "add", &ns]) {
        return false;
    }
    let ok = run(&["-n", &ns, "link", "set", "lo", "up"])
        && std::process::Command::new("tc")
            .args([
                "-n", &ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    run(&["netns", "del", &ns]);
    ok
}

/// Decides `auto` for every emulated link of `topo`: netem where this kernel has it,
/// netsweep's emulator elsewhere.
pub fn resolve_engines(topo: &mut crate::topology::Topology) {
    let auto = topo
        .links
        .iter()
        .any(|l| l.emulate.as_ref().is_some_and(|e| e.engine == Engine::Auto));
    if !auto {
        return;
    }
    let engine = if netem_available() {
        Engine::Netem
    } else {
        Engine::Netsweep
    };
    for l in &mut topo.links {
        if let Some(e) = l.emulate.as_mut().filter(|e| e.engine == Engine::Auto) {
            // netem cannot pick frames by protocol, nor manage its queue: those links stay
            // with netsweep's.
            e.engine = if e.spec.protocol.is_some() || e.spec.aqm != netsweep_emu::Aqm::None {
                Engine::Netsweep
            } else {
                engine
            };
        }
    }
}
