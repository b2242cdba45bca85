//! Experiments: what a scenario varies (factors with levels), the cells of their grid and the
//! interleaved order of their repetitions, a cell's median and spread over repetitions, claims
//! checked against the data (holds, fails, undecided), effects larger than the spread, the
//! arithmetic a page needs, and the rule that prose carries no measured number — values only,
//! no IO (the lab runs the cells, the report draws them).

pub mod arithmetic;
pub mod claim;
pub mod design;
pub mod figure;
pub mod metric;
pub mod observe;
pub mod prose;
pub mod resolve;
pub mod spread;
pub mod verdict;

pub use claim::{Claim, ClaimExpr, FigureRef};
pub use design::{Cell, Design, Factor, FactorKind, Level, Order};
pub use figure::FigureSpec;
pub use metric::{Metric, MetricUnit};
pub use observe::{Effect, Observations};
pub use spread::Spread;
pub use verdict::{Outcome, Verdict};
