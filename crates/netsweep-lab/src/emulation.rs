//! A link's path emulation (`[links.emulate]`): delay, jitter, loss (random or in bursts),
//! duplication, reordering, a bottleneck queue and strict priority — what netem would do,
//! on kernels that have no netem, fq or prio. This file holds the feature whole: the TOML
//! table, its checks, where the emulator goes (its own namespace between the link's two
//! ends, an L2 bump in the wire), the steps that build it and its report.
//!
//! With `engine = "netsweep"` (or `auto` where the kernel has no netem) a link `a — b` is built
//! as `a — [emulator] — b`: two veth pairs into a namespace of its own whose only process is
//! `netsweep lab emulate`, carrying frames between its two ports. Both hosts keep their
//! addresses on one subnet. Segmentation offloads are off on the four ends, so the emulator
//! sees (and paces) wire-sized frames, not 64 KiB bursts. With `engine = "netem"` the same
//! settings become netem qdiscs on the hosts' egress.

use crate::error::SpecError;
use crate::rate::Rate;
use crate::topology::Direction;
use netsweep_emu::config::{DirectionSpec, Jitter, JitterDist, Loss, Qdisc, MAX_DELAY_NS};
use serde::{Deserialize, Serialize};

/// `[links.emulate]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEmulate {
    delay: Option<String>,
    jitter: Option<String>,
    jitter_dist: Option<JitterDist>,
    jitter_reorders: Option<bool>,
    loss: Option<String>,
    loss_burst: Option<f64>,
    duplicate: Option<String>,
    reorder: Option<String>,
    queue: Option<String>,
    queue_frames: Option<u32>,
    qdisc: Option<String>,
    bands: Option<u8>,
    direction: Option<Direction>,
    protocol: Option<crate::topology::Protocol>,
    engine: Option<Engine>,
    cpu: Option<u32>,
    seed: Option<u64>,
}

/// Which implementation emulates a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// netem where the kernel has it, netsweep's emulator elsewhere (decided when the lab
    /// comes up, and recorded).
    #[default]
    Auto,
    /// netsweep's userspace emulator.
    Netsweep,
    /// The kernel's netem qdisc.
    Netem,
}

/// A link's checked emulation settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Emulation {
    /// What each emulated direction does (the link's `rate` is its bottleneck).
    pub spec: DirectionSpec,
    /// Which directions are emulated (the other passes unchanged).
    pub direction: Direction,
    /// Which implementation.
    pub engine: Engine,
    /// The CPU the emulator runs on.
    pub cpu: Option<u32>,
    /// The random generator's seed.
    pub seed: Option<u64>,
}

/// A checked value, or (field, message).
type Checked<T> = Result<T, (String, String)>;

/// A duration: a number and a unit (`ns`, `us`, `µs`, `ms`, `s`).
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" => {
            return Err(format!(
                "\"{text}\" has no unit: write e.g. \"{num}ms\" (ns, us, ms, s)"
            ))
        }
        u => {
            return Err(format!(
                "\"{text}\": unknown unit \"{u}\"; use ns, us, ms or s"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{text}\" is not a duration: write e.g. \"20ms\""))?;
    let ns = v * factor;
    if !(0.0..=MAX_DELAY_NS as f64).contains(&ns) {
        return Err(format!("\"{text}\" is out of range: use 0 to 10s"));
    }
    Ok(ns.round() as u64)
}

/// A probability: `"1%"`, or a fraction `"0.01"`.
pub fn parse_probability(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{text}\" is not a probability: write e.g. \"1%\" or \"0.01\""))?;
    let p = v * scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("\"{text}\" is out of range: use 0% to 100%"));
    }
    Ok(p)
}

/// A size in bytes: `"256KiB"`, `"64k"`, `"1MiB"`, `"1m"`, `"1500"`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor: f64 = match unit.trim().trim_end_matches('b').trim_end_matches('i') {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        u => {
            return Err(format!(
                "\"{text}\": unknown unit \"{u}\"; use B, KiB, MiB or GiB"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("\"{text}\" is not a size: write e.g. \"256KiB\""))?;
    let b = v * factor;
    if !(1.0..=(1u64 << 34) as f64).contains(&b) {
        return Err(format!("\"{text}\" is out of range: use 1 B to 16 GiB"));
    }
    Ok(b as u64)
}

impl RawEmulate {
    /// Checks the table of link `p` (its field path), whose `rate` becomes the bottleneck.
    pub(crate) fn check(&self, p: &str, rate: Option<Rate>) -> Checked<Emulation> {
        let f = |name: &str| format!("{p}.emulate.{name}");
        let dur = |name: &str, v: &Option<String>| -> Checked<u64> {
            v.as_deref()
                .map_or(Ok(0), parse_duration_ns)
                .map_err(|m| (f(name), m))
        };
        let prob = |name: &str, v: &Option<String>| -> Checked<f64> {
            v.as_deref()
                .map_or(Ok(0.0), parse_probability)
                .map_err(|m| (f(name), m))
        };
        let jitter_ns = dur("jitter", &self.jitter)?;
        let jitter = (jitter_ns > 0).then_some(Jitter {
            ns: jitter_ns,
            dist: self.jitter_dist.unwrap_or(JitterDist::Normal),
            reorder: self.jitter_reorders.unwrap_or(false),
        });
        if jitter.is_none() && (self.jitter_dist.is_some() || self.jitter_reorders.is_some()) {
            return Err((
                f("jitter"),
                "jitter_dist and jitter_reorders describe a jitter: give jitter = \"2ms\" too"
                    .into(),
            ));
        }
        let loss_p = prob("loss", &self.loss)?;
        let loss = match (loss_p, self.loss_burst) {
            (0.0, _) => Loss::None,
            (p, None) => Loss::Random { p },
            (l, Some(b)) if b >= 1.0 && l < 1.0 => {
                // Gilbert–Elliott with everything lost in the bad state and nothing in the good
                // one: bursts of `b` frames on average (r = 1/b), `l` of all frames lost
                // (p / (p + r) = l).
                let r = 1.0 / b;
                Loss::Gilbert {
                    p: (l * r / (1.0 - l)).min(1.0),
                    r,
                    h: 0.0,
                    k: 0.0,
                }
            }
            (_, Some(b)) => {
                return Err((
                    f("loss_burst"),
                    format!("a mean burst of {b} frames: give 1 or more (with loss below 100%)"),
                ))
            }
        };
        let queue_bytes = self
            .queue
            .as_deref()
            .map(parse_bytes)
            .transpose()
            .map_err(|m| (f("queue"), m))?;
        let qdisc = match self.qdisc.as_deref() {
            None | Some("fifo") => Qdisc::Fifo,
            Some("prio") => Qdisc::Prio {
                bands: self.bands.unwrap_or(3),
            },
            Some(q) => {
                return Err((
                    f("qdisc"),
                    format!("unknown qdisc \"{q}\": use \"fifo\" or \"prio\" (strict priority by DSCP class)"),
                ))
            }
        };
        if self.bands.is_some() && qdisc == Qdisc::Fifo {
            return Err((f("bands"), "bands go with qdisc = \"prio\"".into()));
        }
        if (queue_bytes.is_some() || self.queue_frames.is_some() || qdisc != Qdisc::Fifo)
            && rate.is_none()
        {
            return Err((
                f("queue"),
                "a queue (and its discipline) builds up only at a bottleneck: give the link a rate"
                    .into(),
            ));
        }
        let spec = DirectionSpec {
            delay_ns: dur("delay", &self.delay)?,
            jitter,
            loss,
            duplicate: prob("duplicate", &self.duplicate)?,
            reorder: prob("reorder", &self.reorder)?,
            rate_bps: rate.map(|r| r.bits_per_sec),
            queue_bytes,
            queue_frames: self.queue_frames,
            qdisc,
            protocol: match self.protocol {
                None | Some(crate::topology::Protocol::Any) => None,
                Some(crate::topology::Protocol::Udp) => Some(17),
                Some(crate::topology::Protocol::Tcp) => Some(6),
                Some(crate::topology::Protocol::Icmp) => Some(1),
            },
        };
        spec.check().map_err(|m| (format!("{p}.emulate"), m))?;
        Ok(Emulation {
            spec,
            direction: self.direction.unwrap_or(Direction::Both),
            engine: self.engine.unwrap_or_default(),
            cpu: self.cpu,
            seed: self.seed,
        })
    }
}

/// A link's emulator as built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorLayout {
    /// The implementation (`auto` resolved when the lab came up).
    pub engine: Engine,
    /// netsweep's emulator: its namespace, between the link's two ends.
    pub netns: String,
    /// Its ports: toward end `a`, then toward end `b`.
    pub ports: [String; 2],
    /// What it was told (both directions; a direction not emulated passes unchanged).
    pub config: netsweep_emu::Config,
    /// Where it writes its counters (JSON, rewritten every 250 ms), its configuration and
    /// its log.
    pub dir: String,
}

impl EmulatorLayout {
    /// The emulator's report file.
    pub fn report_path(&self) -> std::path::PathBuf {
        std::path::Path::new(&self.dir).join(format!("{}.report.json", self.config.link))
    }

    /// The emulator's configuration file.
    pub fn config_path(&self) -> std::path::PathBuf {
        std::path::Path::new(&self.dir).join(format!("{}.config.json", self.config.link))
    }

    /// The emulator's log.
    pub fn log_path(&self) -> std::path::PathBuf {
        std::path::Path::new(&self.dir).join(format!("{}.log", self.config.link))
    }

    /// Reads the emulator's latest report.
    pub fn report(&self) -> Result<netsweep_emu::Report, String> {
        let p = self.report_path();
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    }
}

/// Where a lab's emulators keep their files: beside the fallback state directory, one
/// directory per lab, removed with the lab.
pub fn files_dir(run_id: &str) -> String {
    format!("{}/{run_id}.emu", crate::state::TMP_DIR)
}

/// The emulator of link `index` (named `link`, MTU `mtu`) of lab `run_id`.
pub(crate) fn plan(
    e: &Emulation,
    run_id: &str,
    index: usize,
    link: &str,
    mtu: u32,
) -> EmulatorLayout {
    let pass = netsweep_emu::DirectionSpec::default();
    let dir = |from_a| {
        if e.direction.covers_from_a(from_a) {
            e.spec.clone()
        } else {
            pass.clone()
        }
    };
    EmulatorLayout {
        engine: match e.engine {
            Engine::Auto => Engine::Netsweep,
            other => other,
        },
        netns: format!("{}{run_id}-emu{index}", crate::names::PREFIX),
        ports: [
            format!("{}e{index}-a", crate::names::PREFIX),
            format!("{}e{index}-b", crate::names::PREFIX),
        ],
        config: netsweep_emu::Config {
            link: link.to_string(),
            ports: [
                format!("{}e{index}-a", crate::names::PREFIX),
                format!("{}e{index}-b", crate::names::PREFIX),
            ],
            directions: [dir(true), dir(false)],
            cpu: e.cpu,
            seed: e.seed.unwrap_or(0x6e73_7765_6570_0001 ^ index as u64),
            // The MTU plus an Ethernet header and one 802.1Q tag.
            max_frame: mtu as usize + 18,
            realtime: true,
        },
        dir: files_dir(run_id),
    }
}

/// One direction's settings in words: "delay 10 ms, jitter ±2 ms normal (in order), …".
pub fn describe_direction(d: &DirectionSpec) -> String {
    if d.is_passthrough() && d.qdisc == Qdisc::Fifo {
        return "passes unchanged".into();
    }
    let only = match d.protocol {
        None => "",
        Some(17) => " (udp only)",
        Some(6) => " (tcp only)",
        Some(_) => " (icmp only)",
    };
    let ms = |ns: u64| format!("{} ms", ns as f64 / 1e6);
    let pct = |p: f64| format!("{}%", (p * 1e6).round() / 1e4);
    let mut w = vec![format!("delay {}", ms(d.delay_ns))];
    if let Some(j) = d.jitter {
        w.push(format!(
            "jitter {} {} ({})",
            ms(j.ns),
            match j.dist {
                JitterDist::Uniform => "uniform (±)",
                JitterDist::Normal => "normal (σ)",
                JitterDist::Paretonormal => "pareto-normal (σ)",
            },
            if j.reorder { "may reorder" } else { "in order" }
        ));
    }
    match d.loss {
        Loss::None => {}
        Loss::Random { p } => w.push(format!("loss {}", pct(p))),
        Loss::Gilbert { p, r, .. } => w.push(format!(
            "loss {} in bursts of {:.1} frames (Gilbert-Elliott)",
            pct(p / (p + r)),
            1.0 / r
        )),
    }
    if d.duplicate > 0.0 {
        w.push(format!("duplicate {}", pct(d.duplicate)));
    }
    if d.reorder > 0.0 {
        w.push(format!("reorder {} (skip the delay)", pct(d.reorder)));
    }
    if let Some(r) = d.rate_bps {
        w.push(format!(
            "rate {} Mbit/s, queue {} B{} drop-tail{}",
            r as f64 / 1e6,
            d.queue_limit_bytes(),
            d.queue_frames
                .map_or(String::new(), |n| format!(" / {n} frames")),
            match d.qdisc {
                Qdisc::Fifo => String::new(),
                Qdisc::Prio { bands } =>
                    format!(", strict priority over {bands} bands by DSCP class"),
            }
        ));
    }
    format!("{}{only}", w.join(", "))
}

impl EmulatorLayout {
    /// The emulator in words, a line per direction (`lab up` and `lab show` print it).
    pub fn describe(&self, a: &str, b: &str) -> Vec<String> {
        let head = match self.engine {
            Engine::Netem => "netem on the hosts' egress".to_string(),
            _ => format!(
                "netsweep's emulator in {} (ports {}, {})",
                self.netns, self.ports[0], self.ports[1]
            ),
        };
        let mut v = vec![format!("emulated by {head}")];
        for (i, (from, to)) in [(a, b), (b, a)].into_iter().enumerate() {
            v.push(format!(
                "{from} -> {to}: {}",
                describe_direction(&self.config.directions[i])
            ));
        }
        v
    }
}

/// A run's window on a lab's emulators: their counters when it started.
#[derive(Debug, Default)]
pub struct Window {
    before: Vec<(EmulatorLayout, netsweep_emu::Report)>,
}

/// The lateness that makes a run's emulator "late": a tenth of the direction's delay, or
/// 100 µs where the delay is under a millisecond.
pub fn late_limit_ns(d: &DirectionSpec) -> u64 {
    if d.delay_ns < 1_000_000 {
        100_000
    } else {
        d.delay_ns / 10
    }
}

impl Window {
    /// Opens a window on every netsweep emulator of `layout`: a new lateness window in each
    /// (SIGUSR1, waited for — at most a second), and their counters now.
    pub fn open(layout: &crate::layout::Layout) -> Window {
        let mut before = Vec::new();
        for em in layout.links.iter().filter_map(|l| l.emulator.as_ref()) {
            if em.engine != Engine::Netsweep {
                continue;
            }
            let Ok(r0) = em.report() else { continue };
            // SAFETY: kill(2) with a pid the emulator reported and a plain signal number.
            unsafe { libc::kill(r0.pid as libc::pid_t, libc::SIGUSR1) };
            let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
            let mut r = r0.clone();
            while r.window_start_s <= r0.window_start_s && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
                r = em.report().unwrap_or_else(|_| r.clone());
            }
            before.push((em.clone(), r));
        }
        Window { before }
    }

    /// Closes the window: per emulator and direction, the counters since it opened and the
    /// lateness within it (JSON, for the run's results), and a warning per direction that
    /// was late by more than [`late_limit_ns`].
    pub fn close(&self) -> (serde_json::Value, Vec<String>) {
        let mut links = Vec::new();
        let mut warnings = Vec::new();
        for (em, before) in &self.before {
            let Ok(after) = fresh_report(em) else {
                warnings.push(format!(
                    "the path emulator of link {} gave no report at the end of the run",
                    em.config.link
                ));
                continue;
            };
            let mut dirs = Vec::new();
            for (i, d) in after.directions.iter().enumerate() {
                let spec = &em.config.directions[i.min(1)];
                let counters = before
                    .directions
                    .get(i)
                    .map_or(d.counters, |b| d.counters.since(&b.counters));
                let limit = late_limit_ns(spec);
                let late = d.lateness.p99_ns > limit && !spec.is_passthrough();
                if late {
                    warnings.push(format!(
                        "the path emulator of link {} ({}) was late: p99 {:.0} µs past its \
                         schedule (limit {:.0} µs, a tenth of its delay): what crossed it was \
                         delayed more than asked; give it a CPU of its own (emulate.cpu)",
                        em.config.link,
                        d.direction,
                        d.lateness.p99_ns as f64 / 1e3,
                        limit as f64 / 1e3
                    ));
                }
                dirs.push(serde_json::json!({
                    "direction": d.direction,
                    "settings": describe_direction(spec),
                    "counters": counters,
                    "lateness": d.lateness,
                    "late": late,
                }));
            }
            links.push(serde_json::json!({
                "link": em.config.link,
                "engine": "netsweep",
                "realtime": after.realtime,
                "directions": dirs,
            }));
        }
        (serde_json::Value::Array(links), warnings)
    }

    /// Whether there is anything to record.
    pub fn is_empty(&self) -> bool {
        self.before.is_empty()
    }
}

/// A report the emulator wrote after this call (it rewrites it every 250 ms), so that it
/// counts everything up to now; the latest one after a second at most.
fn fresh_report(em: &EmulatorLayout) -> Result<netsweep_emu::Report, String> {
    let first = em.report()?;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let mut r = first.clone();
    while r.uptime_s < first.uptime_s + 0.26 && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
        r = em.report().unwrap_or(r);
    }
    Ok(r)
}

/// Adds a window's record to a results file: under `lab.emulators` (the free-form lab
/// description a run records) and its warnings beside the run's own.
pub fn record(
    results: &std::path::Path,
    emulators: &serde_json::Value,
    warnings: &[String],
) -> std::io::Result<()> {
    let text = std::fs::read_to_string(results)?;
    let mut v: serde_json::Value = serde_json::from_str(&text).map_err(std::io::Error::other)?;
    let Some(o) = v.as_object_mut() else {
        return Ok(());
    };
    let lab = o.entry("lab").or_insert_with(|| serde_json::json!({}));
    if let Some(l) = lab.as_object_mut() {
        l.insert("emulators".into(), emulators.clone());
    }
    if !warnings.is_empty() {
        let w = o.entry("warnings").or_insert_with(|| serde_json::json!([]));
        if let Some(a) = w.as_array_mut() {
            a.extend(
                warnings
                    .iter()
                    .map(|s| serde_json::Value::String(s.clone())),
            );
        }
    }
    let tmp = results.with_extension("json.emu-partial");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&v).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, results)
}

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
            // netem cannot pick frames by protocol: those links stay with netsweep's.
            e.engine = if e.spec.protocol.is_some() {
                Engine::Netsweep
            } else {
                engine
            };
        }
    }
}

/// Turns a (field, message) into a located error.
pub(crate) fn located(e: (String, String), src: &str, offset: usize) -> SpecError {
    SpecError::new(e.0, e.1).at(src, offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_with_their_units() {
        assert_eq!(parse_duration_ns("20ms"), Ok(20_000_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("250µs"), Ok(250_000));
        assert!(parse_duration_ns("20").unwrap_err().contains("no unit"));
        assert!(parse_duration_ns("11s")
            .unwrap_err()
            .contains("out of range"));
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert_eq!(parse_probability("0.25"), Ok(0.25));
        assert!(parse_probability("150%").is_err());
        assert_eq!(parse_bytes("256KiB"), Ok(256 * 1024));
        assert_eq!(parse_bytes("64k"), Ok(64 * 1024));
        assert_eq!(parse_bytes("1MiB"), Ok(1 << 20));
        assert_eq!(parse_bytes("1500"), Ok(1500));
        assert!(parse_bytes("1 parsec").is_err());
    }

    fn raw(toml_text: &str) -> RawEmulate {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn a_table_becomes_one_directions_spec() {
        let rate = Rate::parse("100mbit").ok();
        let e = raw(r#"delay = "20ms"
jitter = "2ms"
loss = "1%"
loss_burst = 4
queue = "256KiB"
qdisc = "prio"
bands = 4"#)
        .check("links[0]", rate)
        .unwrap();
        assert_eq!(e.spec.delay_ns, 20_000_000);
        assert_eq!(e.spec.jitter.unwrap().dist, JitterDist::Normal);
        assert!(!e.spec.jitter.unwrap().reorder);
        let Loss::Gilbert { p, r, .. } = e.spec.loss else {
            panic!("{:?}", e.spec.loss)
        };
        assert!((p / (p + r) - 0.01).abs() < 1e-12 && (r - 0.25).abs() < 1e-12);
        assert_eq!(e.spec.rate_bps, Some(100_000_000));
        assert_eq!(e.spec.queue_bytes, Some(256 * 1024));
        assert_eq!(e.spec.qdisc, Qdisc::Prio { bands: 4 });
        assert_eq!(e.engine, Engine::Auto);
        let e = raw(r#"loss = "2%""#).check("l", None).unwrap();
        assert_eq!(e.spec.loss, Loss::Random { p: 0.02 });
    }

    #[test]
    fn contradictions_are_refused_naming_the_field() {
        let no_rate = raw(r#"queue = "64KiB""#)
            .check("links[1]", None)
            .unwrap_err();
        assert_eq!(no_rate.0, "links[1].emulate.queue");
        assert!(no_rate.1.contains("give the link a rate"));
        let bands = raw("bands = 3")
            .check("l", Rate::parse("1mbit").ok())
            .unwrap_err();
        assert!(bands.1.contains("qdisc = \"prio\""));
        let dist = raw(r#"jitter_dist = "uniform""#)
            .check("l", None)
            .unwrap_err();
        assert!(dist.1.contains("give jitter"));
        let q = raw(r#"qdisc = "codel""#)
            .check("l", Rate::parse("1mbit").ok())
            .unwrap_err();
        assert!(q.1.contains("unknown qdisc"));
        let prio = raw("qdisc = \"prio\"\nbands = 9")
            .check("l", Rate::parse("1mbit").ok())
            .unwrap_err();
        assert!(prio.1.contains("2 to 8"), "{prio:?}");
        assert!(toml::from_str::<RawEmulate>("wibble = 1").is_err());
    }
}
