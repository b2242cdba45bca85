//! `netsweep list`: every transport, api and pattern, and whether it works here (and if
//! not, why: missing privilege, kernel feature, sysctl).

use netsweep_core::spec::{Api, Pattern, Transport};
use netsweep_transport::{probe, probe_api, supported_apis};
use std::process::ExitCode;

pub fn main() -> ExitCode {
    println!("patterns: {}", Pattern::ALL.map(|p| p.name()).join(", "));
    println!();
    println!("{:<15} {:<10} status", "transport", "api");
    for t in Transport::ALL {
        let p = probe(t);
        let status = |ok: bool, why: Option<String>| {
            if ok {
                "available".to_string()
            } else {
                format!("unavailable: {}", why.unwrap_or_default())
            }
        };
        println!(
            "{:<15} {:<10} {}",
            t.name(),
            "",
            status(p.available, p.reason)
        );
        for &api in supported_apis(t) {
            let a = probe_api(t, api);
            println!(
                "{:<15} {:<10} {}",
                "",
                api.name(),
                status(a.available, a.reason)
            );
        }
        let missing: Vec<&str> = Api::ALL
            .iter()
            .filter(|a| !supported_apis(t).contains(a))
            .map(|a| a.name())
            .collect();
        if !missing.is_empty() {
            println!(
                "{:<15} {:<10} not applicable: {}",
                "",
                "",
                missing.join(", ")
            );
        }
    }
    ExitCode::SUCCESS
}
