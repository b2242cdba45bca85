//! `netsweep list`: every transport, api and pattern, and whether it works here (and if
//! not, why: missing privilege, kernel feature, sysctl).

use netsweep_model::spec::{Api, Pattern};
use netsweep_transport::{probe, probe_api, why_not, TRANSPORTS};
use std::process::ExitCode;

/// Prints what this build has and what works on this host.
pub fn main() -> crate::error::Result {
    println!("patterns: {}", Pattern::ALL.map(|p| p.name()).join(", "));
    println!();
    println!("{:<15} {:<10} status", "transport", "api");
    for d in TRANSPORTS {
        let t = d.transport;
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
        for &api in d.apis {
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
            .filter(|a| !d.apis.contains(a))
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
        for &api in Api::ALL.iter().filter(|a| !d.apis.contains(a)) {
            if let Some(why) = why_not(t, api) {
                println!("{:<15} {:<10} unavailable: {why}", "", api.name());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
