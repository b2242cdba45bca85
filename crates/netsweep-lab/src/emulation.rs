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

mod steps;
mod window;

pub(crate) use steps::{link_steps, netem_steps, start};
pub use steps::{netem_available, resolve_engines, set_emulator_exe};
pub use window::{describe_direction, late_limit_ns, record, Window};

/// `[links.emulate]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEmulate {
    delay: Option<String>,
    delay_back: Option<String>,
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
    aqm: Option<String>,
    aqm_target: Option<String>,
    aqm_interval: Option<String>,
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
    /// `delay_back`: the b→a direction's delay where it differs from `spec`'s, ns.
    pub delay_back_ns: Option<u64>,
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
    /// `aqm` (`codel`, `fq_codel`) with `aqm_target` and `aqm_interval` (RFC 8289's 5 ms
    /// and 100 ms by default).
    fn aqm(&self, f: &dyn Fn(&str) -> String) -> Result<netsweep_emu::Aqm, (String, String)> {
        use netsweep_emu::Aqm;
        let time = |name: &str, v: &Option<String>, default: u64| {
            v.as_deref()
                .map_or(Ok(default), parse_duration_ns)
                .map_err(|m| (f(name), m))
        };
        let target_ns = time("aqm_target", &self.aqm_target, Aqm::TARGET_NS)?;
        let interval_ns = time("aqm_interval", &self.aqm_interval, Aqm::INTERVAL_NS)?;
        let aqm = match self.aqm.as_deref() {
            None | Some("none") => Aqm::None,
            Some("codel") => Aqm::Codel {
                target_ns,
                interval_ns,
            },
            Some("fq_codel") => Aqm::FqCodel {
                target_ns,
                interval_ns,
                flows: 1024,
                quantum: 1514,
            },
            Some(a) => {
                return Err((
                    f("aqm"),
                    format!(
                        "unknown aqm \"{a}\": use \"codel\", \"fq_codel\" or \"none\" (drop-tail)"
                    ),
                ))
            }
        };
        if aqm == Aqm::None && (self.aqm_target.is_some() || self.aqm_interval.is_some()) {
            return Err((
                f("aqm_target"),
                "aqm_target and aqm_interval go with aqm = \"codel\" or \"fq_codel\"".into(),
            ));
        }
        Ok(aqm)
    }

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
        let aqm = self.aqm(&f)?;
        let spec = DirectionSpec {
            aqm,
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
        let direction = self.direction.unwrap_or(Direction::Both);
        let delay_back_ns = self
            .delay_back
            .as_deref()
            .map(parse_duration_ns)
            .transpose()
            .map_err(|m| (f("delay_back"), m))?;
        if delay_back_ns.is_some() && direction != Direction::Both {
            return Err((
                f("delay_back"),
                "delay_back is the b→a delay of a link emulated both ways: drop direction \
                 (or give the one direction's delay as delay)"
                    .into(),
            ));
        }
        let engine = self.engine.unwrap_or_default();
        if engine == Engine::Netem && spec.aqm != netsweep_emu::Aqm::None {
            return Err((
                f("aqm"),
                "the aqm is netsweep's emulator's (netem has none): drop engine = \"netem\"".into(),
            ));
        }
        Ok(Emulation {
            spec,
            direction,
            delay_back_ns,
            engine,
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
        if !e.direction.covers_from_a(from_a) {
            return pass.clone();
        }
        let mut d = e.spec.clone();
        if let (false, Some(back)) = (from_a, e.delay_back_ns) {
            d.delay_ns = back;
        }
        d
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
        // An asymmetric delay: 10 ms a→b, 1 ms b→a, in the emulator's two directions.
        let e = raw("delay = \"10ms\"\ndelay_back = \"1ms\"")
            .check("l", None)
            .unwrap();
        let p = plan(&e, "t", 0, "l0", 1500);
        let [ab, ba] = &p.config.directions;
        assert_eq!((ab.delay_ns, ba.delay_ns), (10_000_000, 1_000_000));
        let one_way = raw("delay = \"10ms\"\ndelay_back = \"1ms\"\ndirection = \"a-to-b\"")
            .check("l", None)
            .unwrap_err();
        assert_eq!(one_way.0, "l.emulate.delay_back");
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

    #[test]
    fn an_aqm_reads_with_its_times_and_is_refused_where_it_cannot_act() {
        let mbit = || Rate::parse("20mbit").ok();
        let e = raw("aqm = \"fq_codel\"\naqm_target = \"2ms\"")
            .check("l", mbit())
            .unwrap();
        assert_eq!(
            e.spec.aqm,
            netsweep_emu::Aqm::FqCodel {
                target_ns: 2_000_000,
                interval_ns: 100_000_000,
                flows: 1024,
                quantum: 1514
            }
        );
        let none = raw("aqm = \"none\"").check("l", mbit()).unwrap();
        assert_eq!(none.spec.aqm, netsweep_emu::Aqm::None);
        for (text, rate, field, words) in [
            ("aqm = \"red\"", mbit(), "l.emulate.aqm", "unknown aqm"),
            ("aqm = \"codel\"", None, "l.emulate", "give a rate"),
            (
                "aqm_target = \"1ms\"",
                mbit(),
                "l.emulate.aqm_target",
                "go with",
            ),
            (
                "aqm = \"codel\"\nengine = \"netem\"",
                mbit(),
                "l.emulate.aqm",
                "netem",
            ),
        ] {
            let e = raw(text).check("l", rate).unwrap_err();
            assert_eq!(e.0, field, "{text}: {e:?}");
            assert!(e.1.contains(words), "{text}: {e:?}");
        }
    }
}
