//! Unstable bands: sizes whose trial-to-trial variation is far above their neighbours'.

use super::series::{median, phi, Prepared};
use super::{Anomaly, AnomalyKind, DetectConfig, PlacementClass};
use crate::stats::student_t_975;

/// Wilson–Hilferty: P(χ²(k) < q), the confidence that a variance ratio exceeds 1.
fn chi2_cdf(q: f64, k: f64) -> f64 {
    if k <= 0.0 || q <= 0.0 {
        return 0.0;
    }
    let h = 2.0 / (9.0 * k);
    phi(((q / k).powf(1.0 / 3.0) - (1.0 - h)) / h.sqrt())
}

pub(super) fn unstable(p: &Prepared, cfg: &DetectConfig) -> Vec<Anomaly> {
    let n = p.y.len();
    let k = cfg.window.max(2);
    let noisy: Vec<bool> = (0..n)
        .map(|i| {
            if p.placement[i] == PlacementClass::Mixed || !p.rel_ci[i].is_finite() {
                return false;
            }
            // Baseline: the lower quartile of a wide window, so a band up to 3/4 of the
            // window wide does not hide itself.
            let mut nb: Vec<f64> = (i.saturating_sub(2 * k)..n.min(i + 2 * k + 1))
                .filter(|&j| j != i && p.rel_ci[j].is_finite())
                .map(|j| p.rel_ci[j])
                .collect();
            if nb.len() < 3 {
                return false;
            }
            nb.sort_by(|a, b| a.total_cmp(b));
            let m = nb[nb.len() / 4];
            p.rel_ci[i] >= cfg.unstable_floor && p.rel_ci[i] >= cfg.unstable_ratio * m
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        if !noisy[i] {
            i += 1;
            continue;
        }
        let a = i;
        while i < n && noisy[i] {
            i += 1;
        }
        let b = i - 1;
        if b + 1 - a < cfg.unstable_min_points.max(1) {
            continue;
        }
        // Reference: neighbours outside the band.
        let refs: Vec<usize> = (a.saturating_sub(k)..a)
            .chain((b + 1)..n.min(b + 1 + k))
            .filter(|&j| p.rel_ci[j].is_finite())
            .collect();
        if refs.len() < 2 {
            continue;
        }
        // Relative sample variance from a CI half-width: s/mean = ci·√n / t(n−1).
        let rel_var = |j: usize| {
            let t = p.trials[j].max(2) as u64;
            let s = p.rel_ci[j] * (t as f64).sqrt() / student_t_975(t - 1);
            s * s
        };
        let ref_var = {
            let mut v: Vec<f64> = refs.iter().map(|&j| rel_var(j)).collect();
            median(&mut v).max(1e-12)
        };
        let (q, dof) = (a..=b).fold((0.0, 0.0), |(q, d), j| {
            let dof = (p.trials[j].max(2) - 1) as f64;
            (q + dof * rel_var(j) / ref_var, d + dof)
        });
        let confidence = chi2_cdf(q, dof);
        let mut band: Vec<f64> = p.rel_ci[a..=b].to_vec();
        let mag = median(&mut band);
        let mut nb: Vec<f64> = refs.iter().map(|&j| p.rel_ci[j]).collect();
        let nb_ci = median(&mut nb);
        // Far above both its own neighbours and the sweep as a whole: on a machine where
        // every point wobbles, one more wobbly band is not an anomaly of the path.
        let mut rest: Vec<f64> = (0..n)
            .filter(|&j| (j < a || j > b) && p.rel_ci[j].is_finite())
            .map(|j| p.rel_ci[j])
            .collect();
        let sweep_ci = median(&mut rest);
        if confidence < cfg.min_confidence
            || mag < cfg.unstable_ratio * nb_ci
            || mag < cfg.unstable_ratio * sweep_ci
        {
            continue;
        }
        out.push(Anomaly {
            kind: AnomalyKind::Unstable,
            from_size: p.size[a],
            to_size: p.size[b],
            magnitude: mag,
            confidence,
            points: (b + 1 - a) as u32,
            metric: "throughput".into(),
            detail: format!(
                "95% CI ±{:.0}% against ±{:.1}% at the neighbouring sizes",
                mag * 100.0,
                nb_ci * 100.0
            ),
            hint: Some(
                "re-run these sizes with a longer --max-point-time, and pin both ends (taskset) to rule out placement".into(),
            ),
            refine: None,
        });
    }
    out
}
