//! Cliffs: a persistent step down in throughput at a size.

use super::refine::refine;
use super::series::{floor_log, median, phi, theil_sen, Prepared};
use super::{placement, Anomaly, AnomalyKind, DetectConfig};

pub(super) fn cliffs(p: &Prepared, cfg: &DetectConfig, dips: &[Anomaly]) -> Vec<Anomaly> {
    let n = p.y.len();
    let k = cfg.window.max(3);
    let fl = floor_log(cfg.floor);
    let in_dip = |i: usize| {
        dips.iter()
            .any(|d| p.size[i] >= d.from_size && p.size[i] <= d.to_size)
    };
    // (boundary index, step, confidence, rank)
    let mut cands: Vec<(usize, f64, f64, f64)> = Vec::new();
    for c in 3..n.saturating_sub(2) {
        let l = c.saturating_sub(k)..c;
        let r = c..n.min(c + k);
        if l.len() < 3 || r.len() < 3 || (l.start..r.end).any(in_dip) {
            continue;
        }
        // A cliff is a level shift: the right side lies below the left side's line carried
        // forward, and the left side above the right side's line carried back. (A bend in the
        // trend fails one of the two.)
        let (sl, il) = theil_sen(&p.x, &p.y, l.clone());
        let (sr, ir) = theil_sen(&p.x, &p.y, r.clone());
        let mut fwd: Vec<f64> = r.clone().map(|j| p.y[j] - (il + sl * p.x[j])).collect();
        let mut back: Vec<f64> = l.clone().map(|i| (ir + sr * p.x[i]) - p.y[i]).collect();
        // Where the step is: the medians tolerate one point on the wrong side of a deep
        // step, the means do not, so the means rank neighbouring boundaries.
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let rank = mean(&fwd).max(mean(&back));
        let step = median(&mut fwd).max(median(&mut back));
        if step > -fl {
            continue;
        }
        let own = placement::step_within_placement(p, cfg, c);
        if own.is_none_or(|d| d < fl)
            && placement::excuses(p, cfg, l.start..r.end, l.start..r.end, -step)
        {
            continue;
        }
        let mean_var = |range: std::ops::Range<usize>| {
            let len = range.len() as f64;
            p.sigma[range].iter().map(|s| s * s).sum::<f64>() / len / len
        };
        let sd = (std::f64::consts::FRAC_PI_2 * (mean_var(l) + mean_var(r)) + p.rough * p.rough)
            .sqrt()
            .max(1e-9);
        let confidence = phi((-step - fl) / sd);
        if confidence >= cfg.min_confidence {
            cands.push((c, step, confidence, rank));
        }
    }
    // Keep the strongest step among neighbouring boundaries.
    cands.sort_by(|a, b| a.3.total_cmp(&b.3));
    let mut taken: Vec<(usize, f64, f64, f64)> = Vec::new();
    for c in cands {
        if taken.iter().all(|t| t.0.abs_diff(c.0) >= k) {
            taken.push(c);
        }
    }
    taken
        .into_iter()
        .map(|(c, step, confidence, _)| {
            let (lo, hi) = (p.size[c - 1], p.size[c]);
            let r = refine(lo, hi);
            let drop = 1.0 - step.exp();
            Anomaly {
                kind: AnomalyKind::Cliff,
                from_size: lo,
                to_size: hi,
                magnitude: drop,
                confidence,
                points: (n - c) as u32,
                metric: "throughput".into(),
                detail: format!(
                    "throughput steps down {:.0}% between {lo} and {hi} bytes and stays down",
                    drop * 100.0
                ),
                hint: r.filter(|r| r.to - r.from > 64).map(|r| {
                    format!(
                        "the step lies between {lo} and {hi} bytes; sweep {} to locate it",
                        r.spec()
                    )
                }),
                refine: r,
            }
        })
        .collect()
}
