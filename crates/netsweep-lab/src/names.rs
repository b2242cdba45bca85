//! Names of everything a lab creates: `nsw-<run id>-<host>` namespaces, `nsw-…` interfaces of at
//! most 15 bytes (the kernel's IFNAMSIZ − 1), the `nsw-lab` nft table, run ids.

use std::time::{SystemTime, UNIX_EPOCH};

/// The prefix of every namespace, interface and nft table a lab creates; `lab clean` removes
/// whatever carries it.
pub const PREFIX: &str = "nsw-";
/// The nft table a lab creates inside each namespace that needs rules.
pub const NFT_TABLE: &str = "nsw-lab";
/// Longest interface name Linux accepts.
pub const IFNAME_MAX: usize = 15;
/// Longest run id.
pub const RUN_ID_MAX: usize = 24;
/// Longest host name.
pub const HOST_NAME_MAX: usize = 32;

/// Whether `s` is 1..=`max` letters, digits, `-` or `_`, starting with a letter or digit.
pub fn is_simple_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

/// Checks a run id, with the fix in the error.
pub fn check_run_id(run_id: &str) -> Result<(), String> {
    if is_simple_name(run_id, RUN_ID_MAX) {
        Ok(())
    } else {
        Err(format!(
            "run id \"{run_id}\" is not usable: use 1–{RUN_ID_MAX} letters, digits, '-' or '_', starting with a letter or digit"
        ))
    }
}

/// A fresh run id: 6 hex digits from the time and the process id.
pub fn generate_run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 20);
    let mixed = mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!("{:06x}", mixed >> 40)
}

/// The namespace of `host` in run `run_id`.
pub fn netns(run_id: &str, host: &str) -> String {
    format!("{PREFIX}{run_id}-{host}")
}

fn truncate(s: String) -> String {
    let mut s = s;
    s.truncate(IFNAME_MAX);
    s
}

/// The interface of link `index` inside the namespace of one end, named after the `peer` host:
/// `nsw-<index>-<peer>`, cut to 15 bytes (the index keeps names unique).
pub fn link_iface(index: usize, peer: &str) -> String {
    truncate(format!("{PREFIX}{index}-{peer}"))
}

/// The VXLAN interface of tunnel `index`, named after the `peer` host: `nsw-t<index>-<peer>`.
pub fn tunnel_iface(index: usize, peer: &str) -> String {
    truncate(format!("{PREFIX}t{index}-{peer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_and_carry_the_prefix() {
        assert_eq!(netns("ab12", "client"), "nsw-ab12-client");
        assert_eq!(link_iface(0, "router"), "nsw-0-router");
        let long = link_iface(12, "a-very-long-host-name");
        assert_eq!(long.len(), IFNAME_MAX);
        assert!(long.starts_with("nsw-12-"));
        assert_eq!(tunnel_iface(1, "server"), "nsw-t1-server");
    }

    #[test]
    fn run_ids_are_checked() {
        assert!(check_run_id("abc-1_2").is_ok());
        assert!(check_run_id("").is_err());
        assert!(check_run_id("-x").is_err());
        assert!(check_run_id("a/b").unwrap_err().contains("letters, digits"));
        assert!(check_run_id(&"x".repeat(25)).is_err());
        let id = generate_run_id();
        assert_eq!(id.len(), 6);
        assert!(check_run_id(&id).is_ok());
    }
}
