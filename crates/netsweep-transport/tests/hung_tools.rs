//! A hung external tool cannot hang a session: `ip` and `ethtool` are replaced on PATH by
//! scripts that never finish, and the route lookup and host facts still come back (from
//! their fallbacks) once the runner's timeout kills them. One process per file: it sets PATH.

use netsweep_tool::QUERY_TIMEOUT;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

#[test]
fn hung_ip_and_ethtool_are_given_up_at_the_timeout() {
    let dir = std::env::temp_dir().join(format!("nsw-hung-tools-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for tool in ["ip", "tc", "ethtool"] {
        let p = dir.join(tool);
        std::fs::write(&p, "#!/bin/sh\nexec /bin/sleep 120\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Only this test runs in this process, so changing PATH races with nothing.
    std::env::set_var("PATH", &dir);

    let t0 = Instant::now();
    let dev = netsweep_transport::packet::route_interface(IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!(
        dev.unwrap(),
        "lo",
        "the fallback finds loopback's interface"
    );
    // One query's timeout and a margin, far below the 120 s the tool would take.
    assert!(t0.elapsed() < QUERY_TIMEOUT + Duration::from_secs(10));

    let h = netsweep_engine::hostinfo::collect("test");
    let lo = h.interfaces.iter().find(|i| i.name == "lo").unwrap();
    assert!(lo.offloads.is_empty() && lo.addresses.is_empty() && lo.qdisc.is_none());
    let _ = std::fs::remove_dir_all(&dir);
}
