//! A probe sized to its scrape (issue 41 item 6, issue 39 item 7): Prometheus says how long it
//! waits (`X-Prometheus-Scrape-Timeout-Seconds`, 10 s when absent, as its default), the
//! exporter keeps a margin for the answer, and the probe's point time, peer timeout and hard
//! deadline are cut to fit what is left. A probe that cannot fit answers
//! `netsweep_probe_success 0` with a reason, never an HTTP error or a scrape timeout.

use super::query::Probe;
use std::time::Duration;

/// Prometheus' default scrape timeout, taken when a request does not say its own.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest direction of a responsiveness probe: eight intervals of 250 ms.
pub const RPM_MIN_DIRECTION: Duration = Duration::from_secs(2);
/// The shortest point a probe measures.
pub const MIN_POINT: Duration = Duration::from_millis(100);

/// What a probe may spend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// The scrape's timeout, as the header said (or the default).
    pub timeout: Duration,
    /// Wall time the probe's run is given before it is killed: the timeout less the margin.
    pub deadline: Duration,
    /// The point's time (`--max-point-time`): the probe's `duration`, cut to fit.
    pub point: Duration,
    /// The longest wait for the peer (`--timeout`).
    pub peer_timeout: Duration,
}

/// The scrape timeout a header value gives: seconds as a decimal number, 0.1..=600; anything
/// else (or no header) is Prometheus' default.
pub fn scrape_timeout(header: Option<&str>) -> Duration {
    header
        .and_then(|h| h.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && (0.1..=600.0).contains(s))
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64)
}

/// Time kept for the answer to reach Prometheus: a tenth of the timeout, 100 ms..=500 ms
/// (the blackbox exporter keeps 500 ms).
fn margin(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_millis(100), Duration::from_millis(500))
}

/// What the run needs beside its point: connecting, the session's setup and warm-up, and
/// printing; an iperf3 probe, at least two iperf3 tests of a second each and their setup.
fn setup(p: &Probe, deadline: Duration) -> Duration {
    if p.pattern == "rpm" {
        // The configuration document and ten idle probes, and the runtime's start.
        Duration::from_millis(1000)
    } else if p.iperf3 {
        Duration::from_millis(2500)
    } else {
        (deadline / 4).clamp(Duration::from_millis(200), Duration::from_secs(2))
    }
}

/// Sizes `p` to a scrape of `timeout`, or says why it cannot fit.
pub fn fit(p: &Probe, timeout: Duration) -> Result<Fit, String> {
    let deadline = timeout.saturating_sub(margin(timeout));
    let setup = setup(p, deadline);
    let room = deadline.saturating_sub(setup);
    if room < MIN_POINT {
        return Err(format!(
            "a scrape timeout of {:.3} s leaves {:.3} s for the probe; it needs {:.3} s at least \
             (raise scrape_timeout)",
            timeout.as_secs_f64(),
            deadline.as_secs_f64(),
            (setup + MIN_POINT + margin(timeout)).as_secs_f64()
        ));
    }
    if p.pattern == "rpm" {
        // Two directions, each at least eight intervals of 250 ms (goodput, then
        // responsiveness, judged over four each).
        let each = p.duration.min(room / 2);
        if each < RPM_MIN_DIRECTION {
            return Err(format!(
                "a scrape timeout of {:.3} s leaves {:.3} s for each direction of the \
                 responsiveness test; it needs {:.3} s a direction (raise scrape_timeout to \
                 {:.1} s at least)",
                timeout.as_secs_f64(),
                each.as_secs_f64(),
                RPM_MIN_DIRECTION.as_secs_f64(),
                (setup + RPM_MIN_DIRECTION * 2 + margin(timeout)).as_secs_f64() + 0.1
            ));
        }
        return Ok(Fit {
            timeout,
            deadline,
            point: each,
            peer_timeout: deadline.min(Duration::from_secs(5)),
        });
    }
    Ok(Fit {
        timeout,
        deadline,
        point: p.duration.min(room),
        peer_timeout: deadline.min(Duration::from_secs(5)),
    })
}

#[cfg(test)]
mod tests {
    use super::super::query::ProbeLimits;
    use super::*;

    fn probe(q: &str) -> Probe {
        let l = ProbeLimits {
            max_duration: Duration::from_secs(10),
            max_size: 1 << 20,
        };
        Probe::parse(q, &l).unwrap()
    }

    #[test]
    fn the_header_sets_the_timeout_and_nonsense_is_the_default() {
        assert_eq!(scrape_timeout(Some("2.5")), Duration::from_millis(2500));
        assert_eq!(scrape_timeout(None), DEFAULT_TIMEOUT);
        for bad in ["", "x", "-1", "NaN", "1e9", "0"] {
            assert_eq!(scrape_timeout(Some(bad)), DEFAULT_TIMEOUT, "{bad}");
        }
    }

    #[test]
    fn a_probe_fits_inside_its_scrape_or_says_it_cannot() {
        // The default: 10 s less 0.5 s; a 500 ms point fits whole.
        let f = fit(&probe("target=h"), DEFAULT_TIMEOUT).unwrap();
        assert_eq!(f.deadline, Duration::from_millis(9500));
        assert_eq!(f.point, Duration::from_millis(500));
        // A long point is cut so point and setup end before the deadline.
        let f = fit(&probe("target=h&duration=8s"), Duration::from_secs(3)).unwrap();
        assert!(f.point + Duration::from_millis(200) <= f.deadline, "{f:?}");
        assert!(f.deadline < f.timeout && f.peer_timeout <= f.deadline);
        // One second: a 300 ms point still fits (setup 200 ms, margin 100 ms).
        let f = fit(&probe("target=h&duration=300ms"), Duration::from_secs(1)).unwrap();
        assert_eq!(f.point, Duration::from_millis(300));
        // Too short for anything, and an iperf3 probe in 2 s: refused with the reason.
        let e = fit(&probe("target=h"), Duration::from_millis(300)).unwrap_err();
        assert!(e.contains("raise scrape_timeout"), "{e}");
        assert!(fit(&probe("target=iperf3://h"), Duration::from_secs(2)).is_err());
    }

    #[test]
    fn a_responsiveness_probe_gets_half_of_what_is_left_a_direction() {
        // 10 s: 9.5 s less 1 s of setup, 4.25 s a direction; the exporter's --max-duration
        // (10 s here) is the default duration, cut to fit.
        let f = fit(&probe("target=h&pattern=rpm"), DEFAULT_TIMEOUT).unwrap();
        assert_eq!(f.point, Duration::from_millis(4250));
        assert!(f.point * 2 + Duration::from_secs(1) <= f.deadline, "{f:?}");
        // 5 s: 4.5 s less 1 s, 1.75 s a direction: refused, naming the timeout it needs.
        let e = fit(&probe("target=h&pattern=rpm"), Duration::from_secs(5)).unwrap_err();
        assert!(e.contains("raise scrape_timeout to 5.6"), "{e}");
    }
}
