//! Dips (NetPIPE's chasms): a band of sizes well below the trend of its neighbours on both
//! sides.

use super::refine::refine;
use super::series::{floor_log, median, phi, theil_sen, Prepared};
use super::{placement, Anomaly, AnomalyKind, DetectConfig};

struct Candidate {
    a: usize,
    b: usize,
    score: f64,
    drop: f64,
    confidence: f64,
    reference: f64,
}

pub(super) fn dips(p: &Prepared, cfg: &DetectConfig) -> Vec<Anomaly> {
    let n = p.y.len();
    let k = cfg.window.max(2);
    let fl = floor_log(cfg.floor);
    let mut cands = Vec::new();
    for a in 2..n {
        for b in a..n.min(a + cfg.max_band) {
            if b + 2 >= n || p.size[b] as f64 > p.size[a] as f64 * cfg.max_band_ratio {
                break;
            }
            if let Some(c) = dip_band(p, cfg, a, b, k, fl) {
                cands.push(c);
            }
        }
    }
    cands.sort_by(|x, y| y.score.total_cmp(&x.score));
    let mut taken: Vec<Candidate> = Vec::new();
    for c in cands {
        if taken.iter().all(|t| c.b + 1 < t.a || c.a > t.b + 1) {
            taken.push(c);
        }
    }
    taken
        .into_iter()
        .map(|c| {
            let (lo, hi) = (p.size[c.a - 1], p.size[c.b + 1]);
            let pts = c.b - c.a + 1;
            let coarse = pts < 4;
            let r = refine(lo, hi);
            Anomaly {
                kind: AnomalyKind::Dip,
                from_size: p.size[c.a],
                to_size: p.size[c.b],
                magnitude: c.drop,
                confidence: c.confidence,
                points: pts as u32,
                metric: "throughput".into(),
                detail: format!(
                    "throughput {:.0}% below the trend of the neighbouring sizes ({:.3} vs {:.3} in the run's unit, geometric means)",
                    c.drop * 100.0,
                    c.reference * (1.0 - c.drop),
                    c.reference
                ),
                hint: match r {
                    Some(r) if coarse => Some(format!(
                        "only {pts} point(s) inside: its edges lie between {lo} and {hi} bytes; sweep {} to resolve it",
                        r.spec()
                    )),
                    _ => None,
                },
                refine: r,
            }
        })
        .collect()
}

fn dip_band(
    p: &Prepared,
    cfg: &DetectConfig,
    a: usize,
    b: usize,
    k: usize,
    fl: f64,
) -> Option<Candidate> {
    let n = p.y.len();
    let l = a.saturating_sub(k)..a;
    let r = (b + 1)..n.min(b + 1 + k);
    if l.len() < 2 || r.len() < 2 {
        return None;
    }
    let med = |range: std::ops::Range<usize>, v: &[f64]| median(&mut v[range].to_vec());
    let (xl, yl) = (med(l.clone(), &p.x), med(l.clone(), &p.y));
    let (xr, yr) = (med(r.clone(), &p.x), med(r.clone(), &p.y));
    // The trend across the band: the chord between the two sides' medians.
    let trend = |x: f64| {
        if xr - xl <= 1e-12 {
            (yl + yr) / 2.0
        } else {
            yl + (x - xl) / (xr - xl) * (yr - yl)
        }
    };
    // A dip comes back: the band lies below the right side's line carried back as well as
    // below the left side's carried forward. (After a step down, the band sits on the right
    // side's line: that is a cliff, not a dip.)
    let (sl, il) = theil_sen(&p.x, &p.y, l.clone());
    let (sr, ir) = theil_sen(&p.x, &p.y, r.clone());
    let below = |s: f64, i: f64| {
        median(
            &mut (a..=b)
                .map(|j| p.y[j] - (i + s * p.x[j]))
                .collect::<Vec<_>>(),
        )
    };
    if below(sl, il) > -fl || below(sr, ir) > -fl {
        return None;
    }
    let resid: Vec<f64> = (a..=b).map(|j| p.y[j] - trend(p.x[j])).collect();
    let m = resid.len();
    // Its edges lie below the trend, and so do the points just inside them: a point below
    // the trend cut off from the band by one at the trend is a disturbance beside the chasm
    // (unpinned on a VM: a −75% point, then one at the trend, then the chasm).
    let inner = m.min(2);
    if resid[..inner]
        .iter()
        .chain(&resid[m - inner..])
        .any(|&r| r > -fl)
    {
        return None;
    }
    let below = resid.iter().filter(|&&r| r <= -fl).count();
    if below * 3 < m * 2 {
        return None;
    }
    // A chasm's edges are part of it: at least half as deep (in ln) as its median. A 40%
    // wobble beside a 97% chasm (a disturbance on a shared machine) is not its edge, nor
    // is a stretch 3× below a first point that had both ends on one CPU (the unpinned
    // lab sweeps: a quarter took ten such points into a 96% chasm).
    let depth = -median(&mut resid.clone());
    if -resid[0] < depth * EDGE_DEPTH || -resid[m - 1] < depth * EDGE_DEPTH {
        return None;
    }
    let mean_r = resid.iter().sum::<f64>() / m as f64;
    let var_band = p.sigma[a..=b].iter().map(|s| s * s).sum::<f64>() / (m * m) as f64;
    let mean_var = |range: std::ops::Range<usize>| {
        let len = range.len() as f64;
        p.sigma[range].iter().map(|s| s * s).sum::<f64>() / len
    };
    let var_ref = std::f64::consts::FRAC_PI_2
        * (mean_var(l.clone()) / l.len() as f64 + mean_var(r.clone()) / r.len() as f64)
        / 2.0;
    let sd = (var_band + var_ref + p.rough * p.rough).sqrt().max(1e-9);
    let drop = 1.0 - mean_r.exp();
    let need = if m == 1 {
        floor_log(cfg.single_point_floor.max(cfg.floor))
    } else {
        fl
    };
    let confidence = phi((-mean_r - need) / sd);
    if -mean_r < need || confidence < cfg.min_confidence {
        return None;
    }
    // Over loopback, a drop within what placement is measured to do, where placement
    // changed, may be placement: not reported. Anything deeper, or on a real path, or as
    // deep below the band's own placement, is.
    let own = placement::below_own_placement(p, cfg, &(a..b + 1));
    if own.is_none_or(|d| d < fl) && placement::excuses(p, cfg, a..b + 1, l.start..r.end, -mean_r) {
        return None;
    }
    let center = (p.x[a] + p.x[b]) / 2.0;
    Some(Candidate {
        a,
        b,
        score: -resid.iter().sum::<f64>(),
        drop,
        confidence,
        reference: trend(center).exp(),
    })
}

/// A dip's first and last points must be at least this fraction of its median ln-depth.
const EDGE_DEPTH: f64 = 0.5;
