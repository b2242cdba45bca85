//! A `/probe` request of `netsweep exporter`, validated: its query string (percent-decoded)
//! parsed into a [`Probe`] — the target (a `netsweep serve`, or an iperf3 server as
//! `iperf3://HOST[:PORT]`), transport, pattern (`rpm`: the responsiveness test), size, duration
//! and direction, each within the exporter's bounds — and the `netsweep run` (or `netsweep
//! rpm`) arguments that measure it. Pure: a function of
//! the text, so a fuzz target reaches it; every refusal names the parameter and its range.

use std::time::Duration;

/// What the exporter allows a probe to ask.
#[derive(Debug, Clone, Copy)]
pub struct ProbeLimits {
    /// Longest `duration`.
    pub max_duration: Duration,
    /// Largest `size`.
    pub max_size: u64,
}

/// One probe, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The server's host name or address (IPv6 in brackets).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// An iperf3 server (`target=iperf3://…`) rather than `netsweep serve`.
    pub iperf3: bool,
    /// `tcp` or `udp`.
    pub transport: &'static str,
    /// `pingpong`, `stream`, `bidir`, or `rpm` (the responsiveness test against a `serve
    /// --rpm`: `netsweep rpm`).
    pub pattern: &'static str,
    /// Message size in bytes.
    pub size: u64,
    /// How long the point may take.
    pub duration: Duration,
    /// The server sends (`stream` only).
    pub reverse: bool,
    /// Fewest timed trials the point must take (`min_trials`, 2..=30, default 2: the fewest an
    /// interval is built from): fewer, and the probe fails.
    pub min_trials: u32,
    /// The throughput's 95% interval half-width the probe asks for (`precision`, `5%` or
    /// `0.05`); a point that misses it fails the probe. None: the run's default, not checked.
    pub precision: Option<f64>,
    /// Peer timeout of the run (`--timeout`): the exporter sets it to fit the scrape.
    pub peer_timeout: Duration,
    /// Concurrent TCP connections (`parallel`, iperf3_exporter's name; `--flows`): 1..=
    /// [`MAX_PARALLEL`], for a stream to the server or a pingpong of a netsweep server.
    pub parallel: u32,
    /// The most each end sends (`bitrate`, iperf3_exporter's name; `--pacing-rate`), bits
    /// per second: TCP probes of a netsweep server only.
    pub bitrate_bps: Option<u64>,
    /// pattern=rpm: the server certificate's fingerprint (`tls_pin`), or any (`insecure`);
    /// neither: the system's roots.
    pub tls_pin: Option<String>,
    /// See `tls_pin`.
    pub insecure: bool,
}

/// The parameters a responsiveness probe (pattern=rpm) does not take.
const NOT_RPM: &str = "transport size reverse min_trials precision parallel bitrate";

/// The most connections one probe opens (`parallel`).
pub const MAX_PARALLEL: u32 = 32;

/// The longest query string read.
pub const MAX_QUERY: usize = 1024;

fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or("a bad %-escape in the query")?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "the query is not UTF-8".to_string())
}

/// A host name, IPv4 or bracketed IPv6 address: letters, digits, `.-:[]`, at most 253.
fn check_host(h: &str) -> Result<(), String> {
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b".-:[]".contains(&c))
        && !h.starts_with('-');
    ok.then_some(())
        .ok_or_else(|| "target: give HOST, HOST:PORT or iperf3://HOST[:PORT]".to_string())
}

/// Splits `HOST[:PORT]` (`[V6]:PORT`).
fn host_port(t: &str) -> Result<(String, Option<u16>), String> {
    let bad_port = || "target: the port must be 1..=65535".to_string();
    if let Some(rest) = t.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').ok_or("target: an unclosed [")?;
        let port = match tail.strip_prefix(':') {
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(bad_port)?,
            ),
            None if tail.is_empty() => None,
            None => return Err("target: text after ]".into()),
        };
        let host = format!("[{h}]");
        check_host(&host)?;
        return Ok((host, port));
    }
    match t.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            check_host(h)?;
            let port = p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(bad_port)?;
            Ok((h.to_string(), Some(port)))
        }
        _ => {
            check_host(t)?;
            Ok((t.to_string(), None))
        }
    }
}

/// A precision as `5%` or `0.05`: 0.001..=1.
fn precision(v: &str) -> Result<f64, String> {
    let x = match v.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|p| p / 100.0),
        None => v.trim().parse::<f64>(),
    };
    x.ok()
        .filter(|x| (0.001..=1.0).contains(x))
        .ok_or_else(|| "precision: 0.1%..=100% (5% or 0.05)".to_string())
}

/// A `bitrate` as iperf3's `-b` writes it (`100M`, `1.5G`, `800K`: bits per second) or in
/// tc's units (`100mbit`): 1 kbit/s..=1 Tbit/s.
fn bitrate(v: &str) -> Result<u64, String> {
    let bad = || "bitrate: a rate such as 100M (iperf3's -b) or 100mbit".to_string();
    let v = v.trim();
    let iperf3 = v.char_indices().last().and_then(|(i, c)| {
        let scale = match c.to_ascii_uppercase() {
            'K' => 1e3,
            'M' => 1e6,
            'G' => 1e9,
            _ => return None,
        };
        v[..i].parse::<f64>().ok().map(|n| n * scale)
    });
    let bps = match iperf3 {
        Some(b) if b.is_finite() => b as u64,
        Some(_) => return Err(bad()),
        None => crate::cli::parse_rate(v).map_err(|_| bad())?,
    };
    if !(1_000..=1_000_000_000_000).contains(&bps) {
        return Err(bad());
    }
    Ok(bps)
}

/// TCP_NOTSENT_LOWAT of a TCP probe's ends (the responsiveness draft's low unsent queue).
const PROBE_NOTSENT_LOWAT: &str = "128k";

impl Probe {
    /// Parses a `/probe` query string.
    pub fn parse(query: &str, limits: &ProbeLimits) -> Result<Probe, String> {
        if query.len() > MAX_QUERY {
            return Err(format!("the query is longer than {MAX_QUERY} bytes"));
        }
        let mut p = Probe {
            host: String::new(),
            port: 0,
            iperf3: false,
            transport: "tcp",
            pattern: "",
            size: 0,
            duration: Duration::from_millis(500),
            reverse: false,
            min_trials: 2,
            precision: None,
            peer_timeout: Duration::from_secs(5),
            parallel: 1,
            bitrate_bps: None,
            tls_pin: None,
            insecure: false,
        };
        let (mut port, mut size, mut target) = (None, None, None);
        let mut seen: Vec<&str> = Vec::new();
        for pair in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = decode(v)?;
            // A repeated parameter was silently the last one (issue 41 item 7).
            if seen.contains(&k) {
                let shown: String = k.chars().take(32).filter(|c| !c.is_control()).collect();
                return Err(format!("{shown} is given twice: give each parameter once"));
            }
            seen.push(k);
            match k {
                "target" => target = Some(v),
                "port" => {
                    port = Some(
                        v.parse::<u16>()
                            .ok()
                            .filter(|p| *p > 0)
                            .ok_or("port: 1..=65535")?,
                    )
                }
                "transport" => {
                    p.transport = match v.as_str() {
                        "tcp" => "tcp",
                        "udp" => "udp",
                        _ => return Err("transport: tcp or udp".into()),
                    }
                }
                "pattern" => {
                    p.pattern = match v.as_str() {
                        "pingpong" => "pingpong",
                        "stream" => "stream",
                        "bidir" => "bidir",
                        "rpm" => "rpm",
                        _ => return Err("pattern: pingpong, stream, bidir or rpm".into()),
                    }
                }
                "size" => {
                    size = Some(crate::cli::parse::size(&v).map_err(|e| format!("size: {e}"))?)
                }
                "duration" => {
                    // Hours are not a unit of the run's grammar; a probe in hours is out of
                    // range, and says so rather than "unknown unit 'h'" (issue 41 item 7).
                    let hours = v
                        .strip_suffix('h')
                        .and_then(|n| n.trim().parse::<f64>().ok());
                    p.duration = match hours {
                        Some(h) if h.is_finite() && h >= 0.0 => {
                            Duration::from_secs_f64((h * 3600.0).min(1e9))
                        }
                        _ => {
                            crate::cli::parse::duration(&v).map_err(|e| format!("duration: {e}"))?
                        }
                    }
                }
                "reverse" => {
                    p.reverse = match v.as_str() {
                        "1" | "true" | "yes" => true,
                        "0" | "false" | "no" | "" => false,
                        _ => return Err("reverse: true or false".into()),
                    }
                }
                "min_trials" => {
                    p.min_trials = v
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (2..=30).contains(n))
                        .ok_or("min_trials: 2..=30")?
                }
                "precision" => p.precision = Some(precision(&v)?),
                "parallel" => {
                    p.parallel = v
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_PARALLEL).contains(n))
                        .ok_or(format!("parallel: 1..={MAX_PARALLEL}"))?
                }
                "bitrate" => p.bitrate_bps = Some(bitrate(&v)?),
                "tls_pin" => {
                    p.tls_pin = Some(
                        netsweep_transport::tls::identity::parse_pin(&v)
                            .map_err(|e| format!("tls_pin: {e}"))?,
                    )
                }
                "insecure" => {
                    p.insecure = match v.as_str() {
                        "1" | "true" | "yes" => true,
                        "0" | "false" | "no" | "" => false,
                        _ => return Err("insecure: true or false".into()),
                    }
                }
                _ => {
                    let shown: String = k.chars().take(32).filter(|c| !c.is_control()).collect();
                    return Err(format!(
                        "unknown parameter {shown:?}: target, port, transport, pattern, size, \
                         duration, reverse, min_trials, precision, parallel, bitrate, tls_pin, \
                         insecure"
                    ));
                }
            }
        }
        let target = target.ok_or("target is required: /probe?target=HOST[:PORT]")?;
        let (t, iperf3) = match target.strip_prefix("iperf3://") {
            Some(rest) => (rest.to_string(), true),
            None => (target, false),
        };
        if let Some((scheme, _)) = t.split_once("://") {
            let shown: String = scheme
                .chars()
                .take(16)
                .filter(|c| !c.is_control())
                .collect();
            return Err(format!(
                "target: {shown}:// is not a scheme the exporter probes; give HOST[:PORT] (a \
                 netsweep serve) or iperf3://HOST[:PORT]"
            ));
        }
        let (host, tport) = host_port(&t)?;
        p.host = host;
        p.iperf3 = iperf3;
        let rpm = p.pattern == "rpm";
        let default_port = match (iperf3, rpm) {
            (true, _) => 5201,
            (false, true) => netsweep_rpm::config::DEFAULT_PORT,
            (false, false) => 7200,
        };
        p.port = port.or(tport).unwrap_or(default_port);
        if rpm {
            if iperf3 {
                return Err("pattern=rpm: an iperf3 server has no responsiveness test".into());
            }
            if let Some(k) = NOT_RPM.split(' ').find(|k| seen.contains(k)) {
                return Err(format!(
                    "{k}: not a parameter of pattern=rpm (the draft's test chooses its own load)"
                ));
            }
            if p.tls_pin.is_some() && p.insecure {
                return Err("tls_pin and insecure: give one".into());
            }
            if !seen.contains(&"duration") {
                // As long as the scrape allows (the fit cuts it): the test ends earlier once
                // goodput and responsiveness are stable.
                p.duration = limits.max_duration;
            }
        } else if p.tls_pin.is_some() || p.insecure {
            return Err("tls_pin, insecure: for pattern=rpm".into());
        }
        if p.pattern.is_empty() {
            p.pattern = if iperf3 { "stream" } else { "bidir" };
        }
        if iperf3 && p.pattern != "stream" {
            return Err("pattern: an iperf3 server measures streams only (pattern=stream)".into());
        }
        if p.reverse && p.pattern != "stream" {
            return Err("reverse: for pattern=stream (bidir measures both ways)".into());
        }
        let flows_run = !iperf3 && p.transport == "tcp" && !p.reverse && p.pattern != "bidir";
        if p.parallel > 1 && !flows_run {
            return Err(
                "parallel: for a netsweep server's tcp stream (client to server) or pingpong; \
                 an iperf3 target, udp, bidir and reverse probe one connection"
                    .into(),
            );
        }
        if p.bitrate_bps.is_some() && (iperf3 || p.transport != "tcp") {
            return Err(
                "bitrate: paces a netsweep server's tcp probe (SO_MAX_PACING_RATE at both \
                 ends); udp is paced only by the fq qdisc, and an iperf3 server's sender is \
                 not netsweep's to pace"
                    .into(),
            );
        }
        let max = if p.transport == "udp" {
            65_507.min(limits.max_size)
        } else {
            limits.max_size
        };
        p.size = size.unwrap_or(if p.transport == "udp" { 1400 } else { 64 << 10 });
        if p.size == 0 || p.size > max {
            return Err(format!("size: 1..={max} bytes"));
        }
        let min = Duration::from_millis(100);
        if p.duration < min || p.duration > limits.max_duration {
            return Err(format!(
                "duration: 100ms..={} s (the exporter's --max-duration)",
                limits.max_duration.as_secs_f64()
            ));
        }
        Ok(p)
    }

    /// The target as `netsweep run` takes it.
    pub fn target(&self) -> String {
        let scheme = if self.iperf3 { "iperf3://" } else { "" };
        format!("{scheme}{}:{}", self.host, self.port)
    }

    /// The `netsweep run` (or `netsweep rpm`) arguments that measure this probe and print
    /// OpenMetrics.
    pub fn run_args(&self) -> Vec<String> {
        let d = self.duration;
        if self.pattern == "rpm" {
            let mut a: Vec<String> = vec![
                "rpm".into(),
                self.target(),
                "--interval".into(),
                "250ms".into(),
                "--max-time".into(),
                format!("{}ms", d.as_millis()),
                "--timeout".into(),
                format!("{}ms", self.peer_timeout.as_millis()),
                "--openmetrics".into(),
                "--no-save".into(),
            ];
            match (&self.tls_pin, self.insecure) {
                (Some(fp), _) => a.extend(["--tls-pin".into(), fp.clone()]),
                (None, true) => a.push("--insecure".into()),
                (None, false) => {}
            }
            return a;
        }
        let mut a: Vec<String> = vec![
            "run".into(),
            self.target(),
            "-t".into(),
            self.transport.into(),
            "-p".into(),
            self.pattern.into(),
            "--sizes".into(),
            self.size.to_string(),
            "--max-point-time".into(),
            format!("{}ms", d.as_millis()),
            "--timeout".into(),
            format!("{}ms", self.peer_timeout.as_millis().max(1)),
            "--min-trials".into(),
            self.min_trials.to_string(),
            "--no-save".into(),
            // A probe ends within its scrape, whatever the path's lag asks.
            "--hard-point-time".into(),
            "-f".into(),
            "openmetrics".into(),
        ];
        if !self.iperf3 {
            if self.transport == "tcp" {
                // What waits after a trial is in the path's queue, not in megabytes of socket
                // buffer: across 50 Mbit/s the receiver went on 185 ms after its sender
                // without it, 36–51 ms with it, and three trials fit 500 ms.
                a.extend(["--notsent-lowat".into(), PROBE_NOTSENT_LOWAT.into()]);
            }
            // Three trials at least fit the point's time.
            a.extend([
                "--trial-time".into(),
                format!("{}ms", (d.as_millis() / 5).max(10)),
            ]);
        }
        if self.reverse {
            a.push("-R".into());
        }
        if self.parallel > 1 {
            a.extend(["--flows".into(), self.parallel.to_string()]);
        }
        if let Some(bps) = self.bitrate_bps {
            a.extend(["--pacing-rate".into(), format!("{bps}bit")]);
        }
        if let Some(x) = self.precision {
            a.extend(["--precision".into(), x.to_string()]);
        }
        a
    }

    /// The probe's identity in the cache: everything it measures.
    pub fn key(&self) -> String {
        self.run_args().join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: ProbeLimits = ProbeLimits {
        max_duration: Duration::from_secs(10),
        max_size: 1 << 20,
    };

    #[test]
    fn a_probe_parses_with_defaults_and_decodes_its_target() {
        let p = Probe::parse("target=198.18.0.2", &L).unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.pattern),
            ("198.18.0.2", 7200, "bidir")
        );
        let p = Probe::parse(
            "target=iperf3%3A%2F%2F%5B2001%3Adb8%3A%3A1%5D%3A5202&size=128k",
            &L,
        )
        .unwrap();
        assert!(p.iperf3);
        assert_eq!(
            (p.host.as_str(), p.port, p.size),
            ("[2001:db8::1]", 5202, 128 << 10)
        );
        assert_eq!(p.target(), "iperf3://[2001:db8::1]:5202");
        let p = Probe::parse(
            "target=h:9&transport=udp&pattern=stream&reverse=1&duration=2s",
            &L,
        )
        .unwrap();
        assert_eq!(
            (p.port, p.transport, p.size, p.reverse),
            (9, "udp", 1400, true)
        );
        assert!(p.run_args().contains(&"-R".to_string()));
        assert!(p.run_args().contains(&"2000ms".to_string()));
        let p = Probe::parse("target=h&pattern=stream&parallel=8", &L).unwrap();
        assert!(p.run_args().join(" ").contains("--flows 8"));
        let p = Probe::parse("target=h&precision=5%25&min_trials=4", &L).unwrap();
        assert_eq!((p.precision, p.min_trials), (Some(0.05), 4));
        let a = p.run_args().join(" ");
        assert!(
            a.contains("--precision 0.05") && a.contains("--min-trials 4"),
            "{a}"
        );
    }

    #[test]
    fn every_parameter_is_bounded_and_named_when_refused() {
        for (q, word) in [
            ("", "target"),
            ("target=a;rm", "target"),
            ("target=-x", "target"),
            ("target=h:0", "port"),
            ("target=h&port=70000", "port"),
            ("target=h&transport=sctp", "transport"),
            ("target=h&pattern=crr", "pattern"),
            ("target=h&size=2G", "size"),
            ("target=h&transport=udp&size=65508", "size"),
            ("target=h&duration=1h", "duration"),
            ("target=h&duration=1000h", "100ms..="),
            ("target=h&duration=1ms", "duration"),
            ("target=h&reverse=maybe", "reverse"),
            ("target=h&pattern=bidir&reverse=1", "reverse"),
            ("target=iperf3://h&pattern=pingpong", "pattern"),
            ("target=h&x=1", "unknown"),
            ("target=h&min_trials=1", "min_trials"),
            ("target=a&target=b", "twice"),
            ("target=http://h:80/x", "http:// is not a scheme"),
            ("target=h&precision=200%25", "precision"),
            ("target=h&precision=x", "precision"),
            ("target=%zz", "escape"),
            ("target=%ff", "UTF-8"),
            ("target=h&parallel=0", "parallel: 1..=32"),
            ("target=h&parallel=33", "parallel: 1..=32"),
            ("target=h&parallel=4", "parallel: for"),
            ("target=iperf3://h&parallel=2", "parallel: for"),
            (
                "target=h&pattern=stream&transport=udp&parallel=2",
                "parallel: for",
            ),
            (
                "target=h&pattern=stream&reverse=1&parallel=2",
                "parallel: for",
            ),
            ("target=h&bitrate=fast", "bitrate: a rate"),
            ("target=h&bitrate=10", "bitrate: a rate"),
            ("target=iperf3://h&bitrate=100M", "bitrate: paces"),
            (
                "target=h&transport=udp&pattern=stream&bitrate=100M",
                "bitrate: paces",
            ),
        ] {
            let e = Probe::parse(q, &L).unwrap_err();
            assert!(e.contains(word), "{q}: {e}");
        }
        // iperf3_exporter's spelling and tc's: the run paces both ends.
        for (v, bps) in [
            ("100M", 100_000_000u64),
            ("1.5G", 1_500_000_000),
            ("800mbit", 800_000_000),
        ] {
            let p = Probe::parse(&format!("target=h&bitrate={v}"), &L).unwrap();
            assert_eq!(p.bitrate_bps, Some(bps), "{v}");
            let args = p.run_args();
            let i = args.iter().position(|a| a == "--pacing-rate").unwrap();
            assert_eq!(args[i + 1], format!("{bps}bit"));
        }
        assert!(Probe::parse(&"a".repeat(2000), &L)
            .unwrap_err()
            .contains("longer"));
    }
}
