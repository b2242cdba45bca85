//! Root tests: two-host, routed three-host (IPv4 and IPv6) and VXLAN labs come up with the
//! configured addresses and MTUs (read back with `ip -j`), carry traffic across their paths,
//! record themselves in a state file, and leave nothing behind; a failing build rolls back.

use crate::common::*;
use netsweep_lab::{Lab, Topology};
use netsweep_testkit::lab::run_id;

const TWO_HOSTS: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "server"
mtu = 9000
offloads = { tso = false, gro = false }
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn two_hosts_come_up_with_addresses_mtus_and_connectivity() {
    let _lock = setup("two_hosts_come_up_with_addresses_mtus_and_connectivity");
    ensure_ping();
    let id = run_id("two");
    let lab = Lab::up(&Topology::parse(TWO_HOSTS).unwrap(), &id).unwrap();
    assert_eq!(lab.netns("client").unwrap(), format!("nsw-{id}-client"));
    let ci = lab
        .interface("client", "client-server")
        .unwrap()
        .to_string();
    assert_eq!(ci, "nsw-0-server");
    let (mtu, addrs) = iface_state(&lab, "client", &ci);
    assert_eq!(mtu, 9000);
    assert_eq!(addrs, ["198.18.1.1/24"]);
    let (mtu, addrs) = iface_state(&lab, "server", "nsw-0-client");
    assert_eq!(mtu, 9000);
    assert_eq!(addrs, ["198.18.1.2/24"]);
    assert!(ping(&lab, "client", "198.18.1.2"));
    // Offloads were applied.
    let out = lab
        .command("client", &["ethtool", "-k", &ci])
        .unwrap()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tcp-segmentation-offload: off"), "{text}");
    assert!(text.contains("generic-receive-offload: off"), "{text}");
    // State file, attach from "another process", description.
    let state = lab.state_file().unwrap().to_path_buf();
    assert!(state.exists());
    let other = Lab::attach(&id).unwrap();
    assert_eq!(other.layout(), lab.layout());
    drop(other); // not owned: the lab stays up
    assert!(ping(&lab, "client", "198.18.1.2"));
    let d = lab.describe();
    assert!(d.contains("nsw-0-server    198.18.1.1/24"), "{d}");
    assert_eq!(
        lab.address_for("client", "server").unwrap().to_string(),
        "198.18.1.2"
    );
    let t = lab.down().unwrap();
    assert_eq!(t.namespaces.len(), 2);
    assert!(!state.exists());
    assert!(namespaces_of(&id).is_empty());
}

const ROUTED: &str = r#"
ipv6 = true
[[hosts]]
name = "client"
[[hosts]]
name = "router"
router = true
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "router"
[[links]]
a = "router"
b = "server"
mtu = 1400
subnet = "198.18.77.0/30"
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn routed_three_hosts_forward_ipv4_and_ipv6() {
    let _lock = setup("routed_three_hosts_forward_ipv4_and_ipv6");
    ensure_ping();
    let id = run_id("routed");
    let lab = Lab::up(&Topology::parse(ROUTED).unwrap(), &id).unwrap();
    let (mtu, addrs) = iface_state(&lab, "server", "nsw-1-router");
    assert_eq!(mtu, 1400);
    assert!(addrs.contains(&"198.18.77.2/30".to_string()), "{addrs:?}");
    assert!(addrs.contains(&"2001:2:0:2::2/64".to_string()), "{addrs:?}");
    let (mtu, _) = iface_state(&lab, "client", "nsw-0-router");
    assert_eq!(mtu, 1500);
    let server = lab.address_for("client", "server").unwrap();
    assert_eq!(server.to_string(), "198.18.77.2");
    assert!(
        ping(&lab, "client", "198.18.77.2"),
        "client → server across the router"
    );
    assert!(
        ping(&lab, "server", "198.18.1.1"),
        "server → client across the router"
    );
    assert!(
        ping(&lab, "client", "2001:2:0:2::2"),
        "IPv6 across the router"
    );
    assert_eq!(
        netsweep_lab::netns::read_sysctl(lab.netns("router").unwrap(), "net/ipv4/ip_forward")
            .unwrap(),
        "1"
    );
    let routes = ip_json(&lab, "client", &["route", "show"]);
    assert!(
        routes
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["dst"] == "198.18.77.0/30" && r["gateway"] == "198.18.1.2"),
        "{routes}"
    );
    drop(lab); // Drop tears down too
    assert!(namespaces_of(&id).is_empty());
}

const VXLAN: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "router"
router = true
[[hosts]]
name = "server"
[[links]]
name = "direct"
a = "client"
b = "server"
[[links]]
a = "client"
b = "router"
[[links]]
a = "router"
b = "server"
[[tunnels]]
name = "vx"
a = "client"
b = "server"
via = ["router"]
[[tunnels]]
name = "vx1500"
a = "client"
b = "server"
via = ["router"]
mtu = 1500
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn vxlan_tunnel_crosses_the_router() {
    let _lock = setup("vxlan_tunnel_crosses_the_router");
    ensure_ping();
    let id = run_id("vxlan");
    let lab = Lab::up(&Topology::parse(VXLAN).unwrap(), &id).unwrap();
    let ci = lab.interface("client", "vx").unwrap().to_string();
    let (mtu, addrs) = iface_state(&lab, "client", &ci);
    assert_eq!(mtu, 1450, "underlay 1500 − 50");
    assert_eq!(addrs, ["198.19.1.1/24"]);
    let link = ip_json(&lab, "client", &["-d", "link", "show", "dev", &ci]);
    let info = &link[0]["linkinfo"]["info_data"];
    assert_eq!(info["id"], 100);
    assert_eq!(info["local"], "198.18.2.1");
    assert_eq!(info["remote"], "198.18.3.2");
    assert!(ping(&lab, "client", "198.19.1.2"), "through the tunnel");
    // A full 1500-byte inner packet (DF set) through the 1500-MTU tunnel: the outer packet
    // (1550 B) is fragmented on the way, as in seed 003.
    let (mtu, _) = iface_state(&lab, "client", lab.interface("client", "vx1500").unwrap());
    assert_eq!(mtu, 1500);
    let st = lab
        .command(
            "client",
            &[
                "ping",
                "-c",
                "1",
                "-W",
                "1",
                "-M",
                "do",
                "-s",
                "1472",
                "198.19.2.2",
            ],
        )
        .unwrap()
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(
        st.success(),
        "full-size packet through the fragmenting tunnel"
    );
    assert!(ping(
        &lab,
        "client",
        &lab.address("server", "direct").unwrap().to_string()
    ));
    // The encapsulated packets went through the router: its forwarding counters moved.
    let stats = ip_json(
        &lab,
        "router",
        &["-s", "link", "show", "dev", "nsw-2-server"],
    );
    let tx = stats[0]["stats64"]["tx"]["packets"].as_u64().unwrap();
    assert!(tx >= 1, "router forwarded nothing: {stats}");
    lab.down().unwrap();
    assert!(namespaces_of(&id).is_empty());
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn a_failing_build_rolls_back() {
    let _lock = setup("a_failing_build_rolls_back");
    let id = run_id("rollback");
    let bad = TWO_HOSTS.replace("gro = false", "no-such-feature = false");
    let e = Lab::up(&Topology::parse(&bad).unwrap(), &id).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("setting offloads"), "{m}");
    assert!(m.contains("fix:"), "{m}");
    assert!(
        namespaces_of(&id).is_empty(),
        "rollback left {:?}",
        namespaces_of(&id)
    );
    assert!(netsweep_lab::state::find(&id).is_none());
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn a_second_lab_with_the_same_run_id_is_refused() {
    let _lock = setup("a_second_lab_with_the_same_run_id_is_refused");
    let id = run_id("dup");
    let t = Topology::parse(TWO_HOSTS).unwrap();
    let lab = Lab::up(&t, &id).unwrap();
    let e = Lab::up(&t, &id).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("already up"), "{e}");
    assert_eq!(namespaces_of(&id).len(), 2, "the first lab is untouched");
    lab.down().unwrap();
}
