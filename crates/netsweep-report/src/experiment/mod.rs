//! An experiment drawn and written up: the figures of its factors ([`figures`]) and its page
//! ([`page`]), from its design and results only.

pub mod figures;
pub mod page;
