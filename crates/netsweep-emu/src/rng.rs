//! The emulator's random draws: a seeded xorshift generator (every run reproducible from the
//! seed) and the jitter distributions.

use crate::config::JitterDist;

/// xorshift64*: fast, seeded, good enough for drop and jitter decisions.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced: xorshift cannot leave zero).
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so nearby seeds give unrelated sequences.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self(if z == 0 { 0x2545_F491_4F6C_DD1D } else { z })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// A standard normal draw (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A jitter draw of size `size` from `dist`, ns (may be negative).
    pub fn jitter(&mut self, size: f64, dist: JitterDist) -> f64 {
        match dist {
            JitterDist::Uniform => (2.0 * self.unit() - 1.0) * size,
            JitterDist::Normal => self.normal() * size,
            JitterDist::Paretonormal => {
                // netem's mix: three quarters of a normal, a quarter of a centred pareto
                // (shape 3), both of standard deviation `size`.
                const A: f64 = 3.0;
                let xm = size * ((A - 1.0) * (A - 1.0) * (A - 2.0) / A).sqrt();
                let pareto = xm / (1.0 - self.unit()).powf(1.0 / A) - A * xm / (A - 1.0);
                0.75 * self.normal() * size + 0.25 * pareto
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    }

    #[test]
    fn draws_have_the_asked_moments_and_repeat_from_the_seed() {
        let mut r = Rng::new(7);
        let n = 200_000;
        let u: Vec<f64> = (0..n).map(|_| r.jitter(1.0, JitterDist::Uniform)).collect();
        let (m, s) = moments(&u);
        assert!(
            m.abs() < 0.01 && (s - 1.0 / 3f64.sqrt()).abs() < 0.01,
            "{m} {s}"
        );
        let g: Vec<f64> = (0..n).map(|_| r.jitter(2.0, JitterDist::Normal)).collect();
        let (m, s) = moments(&g);
        assert!(m.abs() < 0.02 && (s - 2.0).abs() < 0.02, "{m} {s}");
        let hits = (0..n).filter(|_| r.chance(0.01)).count();
        assert!((1700..2300).contains(&hits), "{hits}");
        assert!(!(0..1000).any(|_| r.chance(0.0)));
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
