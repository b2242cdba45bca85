//! What an emulator is told to do: its two ports and, per direction, the delay, jitter, loss,
//! duplication, reordering, bottleneck rate, queue and queueing discipline. The lab builds it
//! from a topology's link (docs/lab.md) and writes it as JSON for the emulator process.

use serde::{Deserialize, Serialize};

/// One emulator: the two interfaces it joins and what each direction does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// The link's name, for reports.
    pub link: String,
    /// The interface toward the link's end `a`, then toward end `b`.
    pub ports: [String; 2],
    /// Frames arriving from `a` (leaving toward `b`), then from `b`.
    pub directions: [DirectionSpec; 2],
    /// The CPU the emulator's thread is pinned to.
    #[serde(default)]
    pub cpu: Option<u32>,
    /// The random generator's seed (every draw of a run is reproducible from it).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The largest frame carried, bytes (the link's MTU plus its Ethernet header).
    pub max_frame: usize,
    /// Run the emulator's thread under SCHED_FIFO (as root), so that the host's other work
    /// cannot hold a release back: a link does not wait for the CPU.
    #[serde(default = "default_realtime")]
    pub realtime: bool,
}

fn default_realtime() -> bool {
    true
}

fn default_seed() -> u64 {
    0x6e73_7765_6570_0001
}

/// What one direction does to its frames, in order: loss and duplication on arrival, the
/// bottleneck (rate and queue, with the queueing discipline), then the delay and jitter.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DirectionSpec {
    /// Fixed one-way delay, ns.
    pub delay_ns: u64,
    /// Jitter added to the delay.
    pub jitter: Option<Jitter>,
    /// Frames lost on arrival.
    pub loss: Loss,
    /// Probability that a frame is sent twice.
    pub duplicate: f64,
    /// Probability that a frame skips the delay (netem's `reorder`): it overtakes the frames
    /// still in the delay line.
    pub reorder: f64,
    /// Bottleneck rate, bits/s (frames' whole Ethernet length); `None`: no bottleneck.
    pub rate_bps: Option<u64>,
    /// The bottleneck's queue: most bytes waiting (drop-tail beyond).
    pub queue_bytes: Option<u64>,
    /// The bottleneck's queue: most frames waiting (drop-tail beyond).
    pub queue_frames: Option<u32>,
    /// How the bottleneck picks the next frame.
    pub qdisc: Qdisc,
    /// Active queue management at the bottleneck (none: drop-tail only).
    #[serde(skip_serializing_if = "Aqm::is_none")]
    pub aqm: Aqm,
    /// Emulate only frames of this IP protocol (17 = UDP, 6 = TCP, 1 = ICMP); the others pass
    /// at once, untouched and counted apart (`bypassed`). `None`: every frame.
    pub protocol: Option<u8>,
}

/// A jitter: a random addition to each frame's delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Jitter {
    /// Its size, ns: the half-width of a uniform draw, or the standard deviation of a normal
    /// or pareto-normal one.
    pub ns: u64,
    /// Its distribution.
    pub dist: JitterDist,
    /// Whether a frame may overtake an earlier one (netem's default); otherwise a frame's
    /// release waits for the one before it, as on a real serial link.
    pub reorder: bool,
}

/// The distribution of a jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JitterDist {
    /// Uniform in ±`ns`.
    Uniform,
    /// Normal with standard deviation `ns`.
    Normal,
    /// netem's pareto-normal: three quarters normal, a quarter pareto (a heavier tail).
    Paretonormal,
}

/// How frames are lost on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "model")]
pub enum Loss {
    /// None lost.
    #[default]
    None,
    /// Each frame lost with probability `p`, independently.
    Random {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert–Elliott: a good and a bad state; `p` moves good→bad, `r` bad→good per frame;
    /// a frame is lost with `1 − h` in the bad state and `k` in the good one.
    Gilbert {
        /// Good → bad transition probability.
        p: f64,
        /// Bad → good transition probability.
        r: f64,
        /// Probability a frame gets through in the bad state.
        h: f64,
        /// Probability a frame is lost in the good state.
        k: f64,
    },
}

/// How the bottleneck picks the next frame to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Qdisc {
    /// First in, first out.
    #[default]
    Fifo,
    /// Strict priority over `bands` bands, by the frame's DSCP class (the top 3 bits of the
    /// DSCP: CS0 … CS7), band = min(class, bands − 1); the highest band nonempty is always
    /// served first. A frame without an IP header goes to band 0.
    Prio {
        /// Number of bands, 2–8.
        bands: u8,
    },
}

/// Active queue management at the bottleneck: what drops a frame before the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Aqm {
    /// Drop-tail only.
    #[default]
    None,
    /// CoDel (RFC 8289) on the FIFO queue.
    Codel {
        /// The sojourn time CoDel tolerates standing, ns (RFC 8289: 5 ms).
        target_ns: u64,
        /// How long the sojourn must stay above target before a drop, ns (100 ms).
        interval_ns: u64,
    },
    /// FQ-CoDel (RFC 8290): flows hashed into `flows` queues, deficit round robin with a
    /// `quantum` of bytes, new flows first, CoDel on each queue.
    FqCodel {
        /// CoDel's target, ns (5 ms).
        target_ns: u64,
        /// CoDel's interval, ns (100 ms).
        interval_ns: u64,
        /// Number of flow queues (1024).
        flows: u32,
        /// Bytes a queue may send per round (one MTU-sized frame: 1514).
        quantum: u32,
    },
}

impl Aqm {
    /// RFC 8289's defaults: target 5 ms, interval 100 ms.
    pub const TARGET_NS: u64 = 5_000_000;
    /// See [`Aqm::TARGET_NS`].
    pub const INTERVAL_NS: u64 = 100_000_000;

    /// True for drop-tail only.
    pub fn is_none(&self) -> bool {
        *self == Aqm::None
    }

    fn check(&self) -> Result<(), String> {
        let (target, interval) = match *self {
            Aqm::None => return Ok(()),
            Aqm::Codel {
                target_ns,
                interval_ns,
            } => (target_ns, interval_ns),
            Aqm::FqCodel {
                target_ns,
                interval_ns,
                flows,
                quantum,
            } => {
                if !(1..=65_536).contains(&flows) {
                    return Err(format!("fq_codel with {flows} flows: give 1 to 65536"));
                }
                if !(64..=65_600).contains(&quantum) {
                    return Err(format!(
                        "fq_codel quantum {quantum}: give 64 to 65600 bytes"
                    ));
                }
                (target_ns, interval_ns)
            }
        };
        if target == 0 || interval <= target || interval > MAX_DELAY_NS {
            return Err(format!(
                "aqm target {target} ns and interval {interval} ns: the target must be above \
                 0 and below the interval, the interval at most 10 s"
            ));
        }
        Ok(())
    }
}

impl Config {
    /// Checks every value; the error names the field and the range.
    pub fn check(&self) -> Result<(), String> {
        if !(64..=65_536 + 64).contains(&self.max_frame) {
            return Err(format!(
                "max_frame {} is outside 64..=65600",
                self.max_frame
            ));
        }
        for (i, d) in self.directions.iter().enumerate() {
            d.check()
                .map_err(|e| format!("{} direction {}: {e}", self.link, ["a-to-b", "b-to-a"][i]))?;
        }
        Ok(())
    }
}

/// The longest delay or jitter an emulator holds frames for.
pub const MAX_DELAY_NS: u64 = 10_000_000_000;

impl DirectionSpec {
    /// Checks every value; the error names the field and the range.
    pub fn check(&self) -> Result<(), String> {
        let prob = |name: &str, p: f64| {
            if (0.0..=1.0).contains(&p) {
                Ok(())
            } else {
                Err(format!("{name} {p} is not a probability (0 to 1)"))
            }
        };
        if self.delay_ns > MAX_DELAY_NS {
            return Err(format!("delay {} ns is above 10 s", self.delay_ns));
        }
        if let Some(j) = self.jitter {
            if j.ns > MAX_DELAY_NS {
                return Err(format!("jitter {} ns is above 10 s", j.ns));
            }
        }
        prob("duplicate", self.duplicate)?;
        prob("reorder", self.reorder)?;
        match self.loss {
            Loss::None => {}
            Loss::Random { p } => prob("loss", p)?,
            Loss::Gilbert { p, r, h, k } => {
                prob("loss p", p)?;
                prob("loss r", r)?;
                prob("loss h", h)?;
                prob("loss k", k)?;
            }
        }
        if self.rate_bps == Some(0) {
            return Err("rate 0 carries nothing: give a rate above 0, or none".into());
        }
        self.aqm.check()?;
        if self.aqm != Aqm::None {
            if self.rate_bps.is_none() {
                return Err(
                    "an aqm manages a bottleneck's queue, and only a rate makes one: give a rate"
                        .into(),
                );
            }
            if self.qdisc != Qdisc::Fifo {
                return Err("an aqm manages a fifo queue: drop qdisc = \"prio\" or the aqm".into());
            }
        }
        if let Qdisc::Prio { bands } = self.qdisc {
            if !(2..=8).contains(&bands) {
                return Err(format!("prio with {bands} bands: give 2 to 8"));
            }
            if self.rate_bps.is_none() {
                return Err(
                    "prio orders a queue, and only a bottleneck (a rate) makes one: give a rate"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// True when the direction does nothing to its frames (they pass at once).
    pub fn is_passthrough(&self) -> bool {
        self.delay_ns == 0
            && self.jitter.is_none()
            && self.loss == Loss::None
            && self.duplicate == 0.0
            && self.reorder == 0.0
            && self.rate_bps.is_none()
    }

    /// The bottleneck queue's limit in bytes: as given, or 50 ms of the rate (the lab's tbf
    /// default), at least 64 KiB.
    pub fn queue_limit_bytes(&self) -> u64 {
        self.queue_bytes.unwrap_or_else(|| {
            self.rate_bps
                .map_or(u64::MAX, |r| (r / 8 / 20).max(64 * 1024))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(d: DirectionSpec) -> Config {
        Config {
            link: "l".into(),
            ports: ["ea".into(), "eb".into()],
            directions: [d.clone(), d],
            cpu: None,
            seed: 1,
            max_frame: 1514,
            realtime: false,
        }
    }

    #[test]
    fn values_are_checked_and_named() {
        assert!(cfg(DirectionSpec::default()).check().is_ok());
        let bad = DirectionSpec {
            loss: Loss::Random { p: 1.5 },
            ..Default::default()
        };
        let e = cfg(bad).check().unwrap_err();
        assert!(e.contains("a-to-b") && e.contains("loss 1.5"), "{e}");
        let prio = DirectionSpec {
            qdisc: Qdisc::Prio { bands: 3 },
            ..Default::default()
        };
        assert!(cfg(prio.clone())
            .check()
            .unwrap_err()
            .contains("give a rate"));
        let prio = DirectionSpec {
            rate_bps: Some(100_000_000),
            ..prio
        };
        assert!(cfg(prio).check().is_ok());
        let json = serde_json::to_string(&cfg(DirectionSpec {
            loss: Loss::Gilbert {
                p: 0.01,
                r: 0.3,
                h: 0.0,
                k: 0.0,
            },
            jitter: Some(Jitter {
                ns: 2_000_000,
                dist: JitterDist::Normal,
                reorder: false,
            }),
            ..Default::default()
        }))
        .unwrap();
        let back: Config = serde_json::from_str(&json).unwrap();
        assert_eq!(back.directions[0].jitter.unwrap().ns, 2_000_000);
    }

    #[test]
    fn the_default_queue_holds_50_ms_of_the_rate() {
        let d = DirectionSpec {
            rate_bps: Some(100_000_000),
            ..Default::default()
        };
        assert_eq!(d.queue_limit_bytes(), 625_000);
        let slow = DirectionSpec {
            rate_bps: Some(1_000_000),
            ..Default::default()
        };
        assert_eq!(slow.queue_limit_bytes(), 64 * 1024);
    }
}
