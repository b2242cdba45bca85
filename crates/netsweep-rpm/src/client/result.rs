//! How `netsweep rpm` shows what it found ([`RpmResult`], the model's): its table and its
//! OpenMetrics exposition.

pub use netsweep_model::rpm::result::{Direction, Idle, Interval, RpmResult, SCHEMA};
use std::fmt::Write as _;

/// How a result is shown: the table `netsweep rpm` prints and the OpenMetrics exposition.
pub trait Report {
    /// The table `netsweep rpm` prints.
    fn render(&self) -> String;
    /// The OpenMetrics exposition `netsweep rpm --openmetrics` prints (and the exporter's
    /// `pattern=rpm` probe answers with).
    fn openmetrics(&self) -> String;
}

fn rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else {
        format!("{:.1} Mbit/s", bps / 1e6)
    }
}

impl Report for RpmResult {
    fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "responsiveness (draft-ietf-ippm-responsiveness-09) of {} over HTTP/2, {}{}",
            self.config_url,
            self.tls_version,
            if self.trust == "insecure" {
                " (certificate NOT checked: --insecure)"
            } else {
                ""
            }
        );
        if let Some(i) = &self.idle {
            let _ = writeln!(
                s,
                "  idle       {:>7.0} RPM  (foreign probes: TCP {:.2} ms, TLS {:.2} ms, GET {:.2} ms; {} probes)",
                i.rpm, i.tcp_ms, i.tls_ms, i.http_ms, i.probes
            );
        }
        for d in &self.directions {
            let rpm = match (&d.responsiveness, d.rpm_interval95) {
                (Some(r), Some((lo, hi))) => format!("{:>7.0} RPM  (95 % {lo:.0}..{hi:.0})", r.rpm),
                (Some(r), None) => format!("{:>7.0} RPM  (too few probes for an interval)", r.rpm),
                (None, _) => "      — RPM  (no window with both probe kinds)".to_string(),
            };
            let _ = writeln!(s, "  {:<9}  {rpm}", d.direction);
            if let Some(r) = &d.responsiveness {
                let _ = writeln!(
                    s,
                    "             loaded GET {:.2} ms (self probes); new connection: TCP {:.2} ms, TLS {:.2} ms, GET {:.2} ms; {} + {} probes",
                    r.http_loaded_ms, r.tcp_ms, r.tls_ms, r.http_foreign_ms, r.probes.0, r.probes.1
                );
            }
            let sat = d
                .goodput_saturated_s
                .map_or("goodput never saturated".to_string(), |t| {
                    format!("goodput saturated after {t:.0} s")
                });
            let stable = d
                .rpm_stable_s
                .map_or("responsiveness not stable".to_string(), |t| {
                    format!("responsiveness stable after {t:.0} s")
                });
            let _ = writeln!(
                s,
                "             goodput {} on {} connection{}{}; {sat}, {stable}; {} in {:.1} s{}",
                rate(d.goodput_bps),
                d.connections,
                if d.connections == 1 { "" } else { "s" },
                if d.connections_failed > 0 {
                    format!(" ({} failed and were replaced)", d.connections_failed)
                } else {
                    String::new()
                },
                d.outcome,
                d.duration_s,
                if d.probe_errors > 0 {
                    format!("; {} probes failed", d.probe_errors)
                } else {
                    String::new()
                }
            );
            for e in &d.load_errors {
                let _ = writeln!(s, "             load connection failed: {e}");
            }
        }
        s
    }

    /// The OpenMetrics exposition `netsweep rpm --openmetrics` prints (and the exporter's
    /// `pattern=rpm` probe answers with): per direction the RPM, its interval, whether it was
    /// stable, the goodput and the loaded round trip; the idle round trip; then `# EOF`.
    fn openmetrics(&self) -> String {
        let mut s = String::new();
        let fam = |s: &mut String, name: &str, unit: Option<&str>, help: &str| {
            let _ = writeln!(s, "# TYPE {name} gauge");
            if let Some(u) = unit {
                let _ = writeln!(s, "# UNIT {name} {u}");
            }
            let _ = writeln!(s, "# HELP {name} {help}");
        };
        let each = |s: &mut String, f: &dyn Fn(&Direction) -> Option<f64>, name: &str| {
            for d in &self.directions {
                if let Some(v) = f(d) {
                    let _ = writeln!(s, "{name}{{direction=\"{}\"}} {v}", d.direction);
                }
            }
        };
        fam(&mut s, "netsweep_rpm", None, "Responsiveness under working conditions, round trips per minute (draft-ietf-ippm-responsiveness-09), the last window's.");
        each(&mut s, &|d| d.responsiveness.map(|r| r.rpm), "netsweep_rpm");
        fam(
            &mut s,
            "netsweep_rpm_ci95_low",
            None,
            "The lower end of the RPM's 95 % bootstrap interval over the window's probes.",
        );
        each(
            &mut s,
            &|d| d.rpm_interval95.map(|i| i.0),
            "netsweep_rpm_ci95_low",
        );
        fam(
            &mut s,
            "netsweep_rpm_ci95_high",
            None,
            "The upper end of the RPM's 95 % bootstrap interval.",
        );
        each(
            &mut s,
            &|d| d.rpm_interval95.map(|i| i.1),
            "netsweep_rpm_ci95_high",
        );
        fam(&mut s, "netsweep_rpm_stable", None, "1 when goodput and responsiveness were both stable, 0 when the test ran out of time first.");
        each(
            &mut s,
            &|d| Some(f64::from(u8::from(d.outcome == "stable"))),
            "netsweep_rpm_stable",
        );
        fam(
            &mut s,
            "netsweep_rpm_goodput_bits_per_second",
            None,
            "The last moving average of the load-generating connections' aggregate goodput.",
        );
        each(
            &mut s,
            &|d| Some(d.goodput_bps),
            "netsweep_rpm_goodput_bits_per_second",
        );
        fam(
            &mut s,
            "netsweep_rpm_loaded_latency_seconds",
            Some("seconds"),
            "The self probes' trimmed mean: a GET beside the load on a loaded connection.",
        );
        each(
            &mut s,
            &|d| d.responsiveness.map(|r| r.http_loaded_ms / 1e3),
            "netsweep_rpm_loaded_latency_seconds",
        );
        if let Some(i) = &self.idle {
            fam(&mut s, "netsweep_rpm_idle_latency_seconds", Some("seconds"), "The idle path's foreign probes: the mean of the TCP, TLS and GET phases' trimmed means.");
            let _ = writeln!(
                s,
                "netsweep_rpm_idle_latency_seconds {}",
                (i.tcp_ms + i.tls_ms + i.http_ms) / 3e3
            );
        }
        s.push_str("# EOF\n");
        s
    }
}
