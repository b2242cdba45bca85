//! When CPU placement may explain a level change: only when both ends run on one host (over
//! loopback, or a veth into another namespace), and only up to the factor placement is
//! measured to make within the run (with a margin).
//!
//! On a small machine both ends of a same-host run share a CPU in some trials and not in
//! others, and that alone moves small-message throughput 3–10×. A slow band makes both ends
//! sleep and the scheduler then puts them on one CPU, so placement flips *because of* a
//! chasm too: placement excuses a drop only within the measured same-CPU vs split-CPU factor
//! (a chasm is far deeper), and between hosts it excuses nothing.

use super::series::Prepared;
use super::PlacementClass;
use crate::results::RunResult;
use crate::spec::Transport;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;

/// What the data path between the two ends is, as far as placement is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// Both ends on one host, over loopback (127/8, ::1, one of the client's own addresses,
    /// unix sockets, shared memory, the in-process server): placement may explain a change.
    Loopback,
    /// Over an interface to a network stack on the same host (a veth into another namespace:
    /// both ends report the same boot id): the ends share the host's CPUs, so placement may
    /// explain a change within its measured bound, as over loopback.
    SameHost,
    /// Over an interface to another host: a change is the path's.
    Network,
    /// Not recorded (a bare series of points): treated as loopback, the cautious reading.
    Unknown,
}

/// The path of a finished run, from its transport, its peer and the client's own addresses.
pub fn path_of(run: &RunResult) -> PathKind {
    if matches!(
        run.spec.transport,
        Transport::UnixStream | Transport::UnixDgram | Transport::UnixSeqpacket | Transport::Shm
    ) || run.peer == "in-process"
    {
        return PathKind::Loopback;
    }
    let b = &run.client.boot_id;
    let same_host = !b.is_empty() && *b == run.server.boot_id;
    let Ok(peer) = run.peer.parse::<SocketAddr>() else {
        return if same_host {
            PathKind::SameHost
        } else {
            PathKind::Unknown
        };
    };
    let ip = canonical(peer.ip());
    let own = run
        .client
        .interfaces
        .iter()
        .flat_map(|i| i.addresses.iter())
        .filter_map(|a| a.split('/').next()?.parse::<IpAddr>().ok())
        .any(|a| canonical(a) == ip);
    if ip.is_loopback() || own {
        PathKind::Loopback
    } else if same_host {
        PathKind::SameHost
    } else {
        PathKind::Network
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// True when placement changed within a stretch of points: some had both ends on one CPU and
/// others not, or some point's trials were split between the two (a level change between
/// mostly-same and never-same points is placement as much as one between all and none).
pub(super) fn varies(c: &[PlacementClass]) -> bool {
    c.contains(&PlacementClass::Mixed)
        || (c.contains(&PlacementClass::Same) && c.contains(&PlacementClass::Different))
}

/// The ln-factor placement alone moves throughput by in this run, measured away from
/// `exclude` (the band under test, so a chasm cannot vouch for itself): for every point whose
/// trials all shared a CPU (or none did), its distance from the points of the opposite
/// placement nearest it on each side (interpolated in ln-size), within `reach` positions.
/// Placement is not one factor (loopback pingpong: 1.5× at some sizes, 10× at others, and
/// varying between trials), so this is the largest distance in `near` or the 90th percentile
/// over the whole run, whichever is larger. `None` when no point had such a neighbour.
fn measured(
    p: &Prepared,
    exclude: &Range<usize>,
    near: &Range<usize>,
    reach: usize,
) -> Option<f64> {
    let n = p.y.len();
    let pure = |c: PlacementClass| matches!(c, PlacementClass::Same | PlacementClass::Different);
    let mut all = Vec::new();
    let mut local = Vec::new();
    for i in (0..n).filter(|i| !exclude.contains(i) && pure(p.placement[*i])) {
        let other = |j: &usize| {
            !exclude.contains(j) && pure(p.placement[*j]) && p.placement[*j] != p.placement[i]
        };
        let left = (i.saturating_sub(reach)..i).rev().find(other);
        let right = ((i + 1)..n.min(i + 1 + reach)).find(other);
        let level = match (left, right) {
            (Some(l), Some(r)) if p.x[r] - p.x[l] > 1e-12 => {
                let w = (p.x[i] - p.x[l]) / (p.x[r] - p.x[l]);
                p.y[l] + w * (p.y[r] - p.y[l])
            }
            (Some(l), Some(r)) => (p.y[l] + p.y[r]) / 2.0,
            (Some(j), None) | (None, Some(j)) => p.y[j],
            (None, None) => continue,
        };
        let d = (p.y[i] - level).abs();
        all.push(d);
        if near.contains(&i) {
            local.push(d);
        }
    }
    all.sort_by(|a, b| a.total_cmp(b));
    let global = all
        .get((all.len() * 9).div_ceil(10).saturating_sub(1))
        .copied();
    let local = local.into_iter().reduce(f64::max);
    match (global, local) {
        (Some(g), Some(l)) => Some(g.max(l)),
        (g, l) => g.or(l),
    }
}

/// The largest ln-drop placement may explain for the band `band` judged against the points
/// of `window` — or `None` when placement explains nothing there (it did not change within
/// the window, or the path is not loopback).
pub(super) fn bound(
    p: &Prepared,
    cfg: &super::DetectConfig,
    band: Range<usize>,
    window: Range<usize>,
) -> Option<f64> {
    if p.path == PathKind::Network || !varies(&p.placement[window.clone()]) {
        return None;
    }
    let reach = 2 * cfg.window.max(2);
    let near = window.start.saturating_sub(reach)..(window.end + reach).min(p.y.len());
    let factor = measured(p, &band, &near, reach)
        .map(|m| m + cfg.placement_margin.max(1.0).ln())
        .unwrap_or(cfg.placement_factor.max(1.0).ln());
    Some(factor.min(cfg.placement_cap.max(1.0).ln()))
}

/// The median ln-throughput of the points in `range` whose trials all had `class`'s
/// placement, when at least `least` did.
fn class_level(
    p: &Prepared,
    range: Range<usize>,
    class: PlacementClass,
    least: usize,
) -> Option<f64> {
    let mut v: Vec<f64> = range
        .filter(|&i| p.placement[i] == class)
        .map(|i| p.y[i])
        .collect();
    (v.len() >= least).then(|| super::series::median(&mut v))
}

/// How far (ln) the band lies below the points of one placement on both sides: for each pure
/// placement with at least two points and a third of the band's, the median of those band
/// points against the median of that placement's points on each side (the lesser of the
/// two), looking twice the trend window out; the larger of the two placements, `None` when
/// neither qualifies. A band that far below points of the same placement is not explained by
/// neighbours of another: split trials a fifth of split neighbours' throughput are a chasm
/// even where the neighbours nearest it sometimes shared a CPU, or where some points inside
/// it did (measured on a VM whose split ends made every point slow: `UDP_BAND_BESIDE_WIDE_CIS`,
/// `UDP_BAND_WITH_MIXED_POINTS`).
pub(super) fn below_own_placement(
    p: &Prepared,
    cfg: &super::DetectConfig,
    band: &Range<usize>,
) -> Option<f64> {
    let n = p.y.len();
    let reach = 2 * cfg.window.max(2);
    let need = 2.max(band.len().div_ceil(3));
    [PlacementClass::Same, PlacementClass::Different]
        .into_iter()
        .filter_map(|class| {
            let inside = class_level(p, band.clone(), class, need)?;
            let left = class_level(p, band.start.saturating_sub(reach)..band.start, class, 2)?;
            let right = class_level(p, band.end..n.min(band.end + reach), class, 2)?;
            Some((left - inside).min(right - inside))
        })
        .reduce(f64::max)
}

/// How far (ln) throughput steps down at the boundary before point `c` within one
/// placement: for each pure placement with at least two points on each side (twice the trend
/// window out), the median of its points before `c` less the median of its points from `c`;
/// the larger of the two, `None` when neither qualifies. A step that deep among points of
/// one placement is no placement change: a cliff whose split points after it sat at 9.5
/// Mbit/s against 144 before it was excused because one split point after it ran at 198
/// beside same-CPU points at 9.6 (`TCP_CLIFF_WITH_WIDE_OUTLIERS`).
pub(super) fn step_within_placement(
    p: &Prepared,
    cfg: &super::DetectConfig,
    c: usize,
) -> Option<f64> {
    let n = p.y.len();
    let reach = 2 * cfg.window.max(2);
    [PlacementClass::Same, PlacementClass::Different]
        .into_iter()
        .filter_map(|class| {
            let left = class_level(p, c.saturating_sub(reach)..c, class, 2)?;
            let right = class_level(p, c..n.min(c + reach), class, 2)?;
            Some(left - right)
        })
        .reduce(f64::max)
}

/// True when placement may explain an ln-drop `drop` (positive) of `band` against `window`.
pub(super) fn excuses(
    p: &Prepared,
    cfg: &super::DetectConfig,
    band: Range<usize>,
    window: Range<usize>,
    drop: f64,
) -> bool {
    bound(p, cfg, band, window).is_some_and(|b| drop <= b)
}

#[cfg(test)]
mod tests {
    use super::super::measured::{
        TCP_CLIFF_WITH_WIDE_OUTLIERS, UDP_BAND_AFTER_A_SHARED_START, UDP_BAND_AMID_PLACEMENT_FLIPS,
        UDP_BAND_BESIDE_WIDE_CIS, UDP_BAND_WITH_MIXED_POINTS, VETH_BAND,
    };
    use super::super::{detect_series_on, Anomaly, AnomalyKind, DetectConfig, SeriesPoint};
    use super::*;

    /// A flat fine sweep at `level` with ±1% CIs and ±2% wiggle, every point on one CPU.
    fn flat(n: usize, level: f64) -> Vec<SeriesPoint> {
        (0..n)
            .map(|i| {
                let wiggle = 1.0 + 0.02 * ((i * 7919 % 13) as f64 / 6.0 - 1.0);
                SeriesPoint {
                    size: 600 + 16 * i as u64,
                    mean: level * wiggle,
                    ci95: level * 0.01,
                    trials: 3,
                    placement: PlacementClass::Same,
                }
            })
            .collect()
    }

    /// The placement the scheduler picks while both ends sleep on a slow path: it flips.
    fn flipping(i: usize) -> PlacementClass {
        [
            PlacementClass::Mixed,
            PlacementClass::Different,
            PlacementClass::Same,
            PlacementClass::Mixed,
        ][i % 4]
    }

    fn sink(s: &mut [SeriesPoint], band: std::ops::Range<usize>, factor: f64) {
        for (k, p) in s[band].iter_mut().enumerate() {
            p.mean *= factor;
            p.ci95 *= factor;
            p.placement = flipping(k);
        }
    }

    /// The dips and cliffs `found` gives (unstable bands left out).
    fn levels(s: &[SeriesPoint], path: PathKind) -> Vec<(AnomalyKind, u64, u64)> {
        found(s, path)
            .into_iter()
            .filter(|a| a.0 != AnomalyKind::Unstable)
            .collect()
    }

    fn found(s: &[SeriesPoint], path: PathKind) -> Vec<(AnomalyKind, u64, u64)> {
        detect_series_on(s, &DetectConfig::default(), path)
            .iter()
            .map(|a: &Anomaly| (a.kind, a.from_size, a.to_size))
            .collect()
    }

    #[test]
    fn a_deep_chasm_where_placement_flips_is_a_dip_at_its_sizes() {
        for path in [PathKind::Network, PathKind::Loopback, PathKind::Unknown] {
            for (band, factor) in [(20..32, 0.01), (10..14, 0.02), (35..44, 0.025)] {
                let mut s = flat(56, 390.0);
                sink(&mut s, band.clone(), factor);
                assert_eq!(
                    found(&s, path),
                    vec![(AnomalyKind::Dip, s[band.start].size, s[band.end - 1].size)],
                    "{path:?} band {band:?}"
                );
            }
        }
    }

    #[test]
    fn a_step_from_mostly_shared_to_split_cpus_is_placement_on_loopback() {
        // Seen in a clean default sweep: points whose trials mostly shared a CPU, then points
        // that never did, 2.2× slower. No point had *every* trial on one CPU.
        let mut s = flat(40, 390.0);
        for p in &mut s[..20] {
            p.placement = PlacementClass::Mixed;
        }
        for p in &mut s[20..] {
            p.mean /= 2.2;
            p.ci95 /= 2.2;
            p.placement = PlacementClass::Different;
        }
        assert_eq!(found(&s, PathKind::Loopback), vec![]);
        assert_eq!(
            found(&s, PathKind::Network),
            vec![(AnomalyKind::Cliff, s[19].size, s[20].size)]
        );
    }

    /// A flat sweep whose first 16 points alternate between one CPU and split CPUs, the
    /// split ones `factor`× slower: the run's own measure of placement.
    fn placement_measured(factor: f64) -> Vec<SeriesPoint> {
        let mut s = flat(60, 390.0);
        for p in s[..16].iter_mut().step_by(2) {
            p.mean /= factor;
            p.ci95 /= factor;
            p.placement = PlacementClass::Different;
        }
        s
    }

    #[test]
    fn on_loopback_the_measured_placement_factor_with_a_margin_bounds_what_is_excused() {
        // Measured 1.5×: a 6× band where placement flips is beyond 2 × 1.5× (the default
        // 10× would have excused it).
        let s = placement_measured(1.5);
        assert_eq!(found(&s, PathKind::Loopback), vec![]);
        let mut six = s.clone();
        sink(&mut six, 36..44, 1.0 / 6.0);
        assert_eq!(
            found(&six, PathKind::Loopback),
            vec![(AnomalyKind::Dip, s[36].size, s[43].size)]
        );
        // Measured 8×: a 12× band of split (or partly split) points among points on one CPU
        // is within 2 × 8× and is excused; a 99% band (100×) is not.
        let s = placement_measured(8.0);
        assert_eq!(found(&s, PathKind::Loopback), vec![]);
        let mut twelve = s.clone();
        sink(&mut twelve, 36..44, 1.0 / 12.0);
        for (k, p) in twelve[36..44].iter_mut().enumerate() {
            p.placement = [PlacementClass::Mixed, PlacementClass::Different][k % 2];
        }
        assert_eq!(found(&twelve, PathKind::Loopback), vec![]);
        // The same band with points on one CPU inside it, 12× below the points on one CPU
        // beside it: placement does not explain that.
        let mut own = s.clone();
        sink(&mut own, 36..44, 1.0 / 12.0);
        assert_eq!(levels(&own, PathKind::Loopback).len(), 1, "{own:?}");
        let mut deep = s.clone();
        sink(&mut deep, 36..44, 0.01);
        assert_eq!(
            found(&deep, PathKind::Loopback),
            vec![(AnomalyKind::Dip, s[36].size, s[43].size)]
        );
        // On a real path nothing is excused.
        assert_eq!(
            found(&twelve, PathKind::Network)
                .into_iter()
                .filter(|a| a.1 >= s[20].size)
                .collect::<Vec<_>>(),
            vec![(AnomalyKind::Dip, s[36].size, s[43].size)]
        );
    }

    #[test]
    fn a_chasm_to_the_end_of_the_sweep_is_a_cliff_where_it_starts() {
        for path in [PathKind::Network, PathKind::Loopback] {
            let mut s = flat(40, 390.0);
            sink(&mut s, 28..40, 0.01);
            assert_eq!(
                found(&s, path),
                vec![(AnomalyKind::Cliff, s[27].size, s[28].size)],
                "{path:?}"
            );
        }
    }

    #[test]
    fn a_placement_only_5x_change_on_loopback_is_nothing_but_on_a_link_is_reported() {
        // A step: from point 30 on, the ends never share a CPU and throughput is 5× lower.
        let mut step = flat(50, 390.0);
        for p in &mut step[30..] {
            p.mean /= 5.0;
            p.ci95 /= 5.0;
            p.placement = PlacementClass::Different;
        }
        // A band: six points on split CPUs, 5× lower.
        let mut band = flat(50, 390.0);
        for p in &mut band[20..26] {
            p.mean /= 5.0;
            p.ci95 /= 5.0;
            p.placement = PlacementClass::Different;
        }
        for path in [PathKind::Loopback, PathKind::Unknown] {
            assert_eq!(found(&step, path), vec![], "{path:?}");
            assert_eq!(found(&band, path), vec![], "{path:?}");
        }
        assert_eq!(
            found(&step, PathKind::Network),
            vec![(AnomalyKind::Cliff, step[29].size, step[30].size)]
        );
        assert_eq!(
            found(&band, PathKind::Network),
            vec![(AnomalyKind::Dip, band[20].size, band[25].size)]
        );
    }

    #[test]
    fn a_disturbed_point_beside_a_deep_chasm_is_not_its_edge() {
        // Seen unpinned across the veth: a −40% point two steps beyond a 97% chasm.
        for path in [PathKind::Network, PathKind::Loopback] {
            let mut s = flat(56, 390.0);
            sink(&mut s, 20..32, 0.025);
            s[33].mean *= 0.6;
            s[17].mean *= 0.55;
            assert_eq!(
                found(&s, path),
                vec![(AnomalyKind::Dip, s[20].size, s[31].size)],
                "{path:?}"
            );
        }
    }

    #[test]
    fn a_measured_veth_chasm_with_placement_flipping_inside_is_one_dip() {
        let s = measured_series(VETH_BAND);
        for path in [PathKind::Network, PathKind::Unknown] {
            let dips: Vec<_> = levels(&s, path);
            assert_eq!(dips, vec![(AnomalyKind::Dip, 952, 1240)], "{path:?}");
        }
    }

    fn measured_series(rows: &[(u64, f64, f64, u32, u32, u32)]) -> Vec<SeriesPoint> {
        rows.iter()
            .map(|&(size, mean, ci95, trials, same, observed)| SeriesPoint {
                size,
                mean,
                ci95,
                trials,
                placement: match same {
                    0 => PlacementClass::Different,
                    s if s == observed => PlacementClass::Same,
                    _ => PlacementClass::Mixed,
                },
            })
            .collect()
    }

    #[test]
    fn a_placement_step_before_a_chasm_is_not_its_edge() {
        let s = measured_series(UDP_BAND_AFTER_A_SHARED_START);
        let dips: Vec<_> = levels(&s, PathKind::Network);
        assert_eq!(dips, vec![(AnomalyKind::Dip, 376, 568)]);
    }

    #[test]
    fn a_chasm_five_times_below_neighbours_with_wide_cis_is_a_dip() {
        for rows in [UDP_BAND_BESIDE_WIDE_CIS, UDP_BAND_WITH_MIXED_POINTS] {
            let s = measured_series(rows);
            for path in [PathKind::SameHost, PathKind::Network] {
                assert_eq!(
                    levels(&s, path),
                    vec![(AnomalyKind::Dip, 376, 568)],
                    "{path:?}"
                );
            }
        }
    }

    #[test]
    fn a_cliff_with_two_wide_outliers_after_it_is_one_cliff() {
        // On one host (the lab's path). Across hosts nothing is excused either way, and the
        // two fast points after the step read as the chasm's end (a dip 956..972).
        let s = measured_series(TCP_CLIFF_WITH_WIDE_OUTLIERS);
        for path in [PathKind::SameHost, PathKind::Loopback, PathKind::Unknown] {
            assert_eq!(
                levels(&s, path),
                vec![(AnomalyKind::Cliff, 940, 956)],
                "{path:?}"
            );
        }
    }

    #[test]
    fn on_one_host_placement_flips_beside_a_chasm_are_placement_and_the_chasm_a_dip() {
        for rows in [UDP_BAND_AMID_PLACEMENT_FLIPS, UDP_BAND_AFTER_A_SHARED_START] {
            let s = measured_series(rows);
            let dips: Vec<_> = levels(&s, PathKind::SameHost);
            assert_eq!(dips, vec![(AnomalyKind::Dip, 376, 568)]);
        }
        // Across hosts nothing is excused: the flips are reported beside the band.
        let s = measured_series(UDP_BAND_AMID_PLACEMENT_FLIPS);
        assert!(found(&s, PathKind::Network).len() > 1);
    }

    fn sample(transport: Transport, peer: &str) -> RunResult {
        let mut r =
            crate::results::load(include_str!("../../../../tests/data/tcp-pingpong.json")).unwrap();
        r.spec.transport = transport;
        r.peer = peer.into();
        r
    }

    #[test]
    fn the_path_comes_from_the_transport_the_peer_and_the_clients_addresses() {
        // tests/data/tcp-pingpong.json: the client has 192.0.2.2 and fd00::2 on eth0.
        for (t, peer, want) in [
            (Transport::Tcp, "in-process", PathKind::Loopback),
            (Transport::Tcp, "127.0.0.1:7000", PathKind::Loopback),
            (Transport::Tcp, "[::1]:7000", PathKind::Loopback),
            (Transport::Tcp, "192.0.2.2:7000", PathKind::Loopback),
            (Transport::Udp, "[fd00::2]:7000", PathKind::Loopback),
            (
                Transport::Udp,
                "[::ffff:127.0.0.1]:7000",
                PathKind::Loopback,
            ),
            (Transport::UnixStream, "", PathKind::Loopback),
            (Transport::Shm, "", PathKind::Loopback),
            (Transport::Tcp, "198.18.1.2:7300", PathKind::Network),
            (Transport::Udp, "[fd00::3]:7000", PathKind::Network),
            (Transport::Tcp, "", PathKind::Unknown),
            (Transport::Packet, "nsw-0-server", PathKind::Unknown),
        ] {
            assert_eq!(path_of(&sample(t, peer)), want, "{t:?} {peer}");
        }
        // Both ends report one boot id: another namespace of the same host.
        for (t, peer, want) in [
            (Transport::Tcp, "198.18.1.2:7300", PathKind::SameHost),
            (Transport::Packet, "nsw-0-server", PathKind::SameHost),
            (Transport::Tcp, "127.0.0.1:7000", PathKind::Loopback),
        ] {
            let mut r = sample(t, peer);
            r.client.boot_id = "3f0c-boot".into();
            r.server.boot_id = "3f0c-boot".into();
            assert_eq!(path_of(&r), want, "{t:?} {peer}");
            r.server.boot_id = "other-host".into();
            assert_ne!(path_of(&r), PathKind::SameHost, "{t:?} {peer}");
        }
    }
}
