//! `netsweep list`: every transport, api and pattern, and whether it works here.

use netsweep_core::spec::{Api, Pattern, Transport};
use netsweep_transport::probe;
use std::process::ExitCode;

pub fn main() -> ExitCode {
    println!(
        "{:<12} {:<10} {:<18} status",
        "transport", "apis", "patterns"
    );
    for t in Transport::ALL {
        let p = probe(t);
        let status = if p.available {
            "available".to_string()
        } else {
            format!("unavailable: {}", p.reason.unwrap_or_default())
        };
        println!(
            "{:<12} {:<10} {:<18} {}",
            t.name(),
            Api::ALL.map(|a| a.name()).join(","),
            Pattern::ALL.map(|p| p.name()).join(","),
            status
        );
    }
    ExitCode::SUCCESS
}
