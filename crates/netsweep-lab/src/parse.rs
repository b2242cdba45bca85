//! Reading topology files: TOML text → checked [`Topology`].

use crate::error::{LabError, SpecError};
use crate::raw::RawTopology;
use crate::topology::Topology;
use crate::{tomlparse, validate};
use std::path::Path;

impl Topology {
    /// Parses a topology from TOML text. Errors carry the line and field at fault.
    pub fn parse(text: &str) -> Result<Topology, LabError> {
        Ok(parse_text(text, None)?)
    }

    /// Reads and parses a topology file.
    pub fn load(path: &Path) -> Result<Topology, LabError> {
        let text = read_spec_file(path, "topology")?;
        Ok(parse_text(&text, Some(path))?)
    }
}

/// Parses topology text that came from `file` (for error messages).
pub(crate) fn parse_text(text: &str, file: Option<&Path>) -> Result<Topology, SpecError> {
    let raw: RawTopology = tomlparse::parse(text, file)?;
    from_raw(raw, text, file)
}

/// Validates an already parsed topology whose spans point into `text`.
pub(crate) fn from_raw(
    raw: RawTopology,
    text: &str,
    file: Option<&Path>,
) -> Result<Topology, SpecError> {
    validate::validate(raw, text).map_err(|e| e.in_file(file))
}

/// Reads a spec file; a missing or unreadable file is a usage error naming the path.
pub(crate) fn read_spec_file(path: &Path, what: &str) -> Result<String, LabError> {
    std::fs::read_to_string(path).map_err(|e| {
        LabError::Usage(format!(
            "cannot read {what} file {}: {e}: check the path",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{Direction, Protocol, ShaperKind};

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
mtu = 9000
rate = "100mbit"
offloads = { tso = false, gro = "off", tx = true }
loss = { probability = 0.01, protocol = "udp", direction = "a-to-b" }

[[links.classes]]
priority = 5
rate = "60mbit"
prio = 1

[[links.classes]]
priority = 6
rate = "20mbit"
ceil = "30mbit"

[[links]]
name = "uplink"
a = "router"
b = "server"
subnet = "198.19.200.0/30"
b_addr = "198.19.200.1"
shape_band = { lo = 1000, hi = 1100, rate = "1mbit" }
rate = "1gbit"
direction = "b-to-a"
loss = 0.5

[[tunnels]]
a = "client"
b = "server"
via = ["router"]
"#;

    fn err(text: &str) -> SpecError {
        match parse_text(text, None) {
            Ok(t) => panic!("expected an error, parsed {t:?}"),
            Err(e) => e,
        }
    }

    const TWO: &str = "[[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"b\"\n";

    #[test]
    fn parses_every_field() {
        let t = parse_text(ROUTED, None).unwrap();
        assert!(t.ipv6);
        assert_eq!(t.hosts.len(), 3);
        assert!(t.hosts[1].router);
        let l0 = &t.links[0];
        assert_eq!(l0.name, "client-router");
        assert_eq!(l0.mtu, 9000);
        assert_eq!(l0.rate.unwrap().bits_per_sec, 100_000_000);
        assert_eq!(l0.shaper, ShaperKind::Htb, "classes imply htb");
        assert_eq!(l0.offloads.get("tso"), Some(&false));
        assert_eq!(l0.offloads.get("gro"), Some(&false));
        assert_eq!(l0.offloads.get("tx"), Some(&true));
        assert_eq!(l0.classes.len(), 2);
        assert_eq!(
            l0.classes[0].ceil.bits_per_sec, 100_000_000,
            "ceil defaults to the link rate"
        );
        assert_eq!(l0.classes[0].prio, 1);
        assert_eq!(l0.classes[1].ceil.bits_per_sec, 30_000_000);
        let loss = l0.loss.as_ref().unwrap();
        assert_eq!(loss.probability, 0.01);
        assert_eq!(loss.protocol, Protocol::Udp);
        assert_eq!(loss.direction, Direction::AToB);
        let l1 = &t.links[1];
        assert_eq!(l1.name, "uplink");
        assert_eq!(l1.subnet.unwrap().to_string(), "198.19.200.0/30");
        assert_eq!(l1.b_addr.unwrap().to_string(), "198.19.200.1");
        assert_eq!(l1.direction, Direction::BToA);
        assert_eq!(l1.loss.as_ref().unwrap().protocol, Protocol::Any);
        let band = l1.shape_band.as_ref().unwrap();
        assert_eq!(
            (band.lo, band.hi, band.rate.bits_per_sec),
            (1000, 1100, 1_000_000)
        );
        assert_eq!(t.tunnels[0].name, "vx0");
        assert_eq!(t.tunnels[0].vni, 100);
        assert_eq!(t.tunnels[0].port, 4789);
        assert_eq!(t.tunnels[0].via, vec!["router".to_string()]);
        assert_eq!(t.links[0].shaper, ShaperKind::Htb);
    }

    #[test]
    fn plain_rate_uses_tbf() {
        let t = parse_text(
            &format!("{TWO}[[links]]\na = \"a\"\nb = \"b\"\nrate = \"10mbit\"\n"),
            None,
        )
        .unwrap();
        assert_eq!(t.links[0].shaper, ShaperKind::Tbf);
        assert_eq!(t.links[0].mtu, 1500);
    }

    #[test]
    fn syntax_error_has_line_and_column() {
        let e = err("[[hosts]\nname = \"a\"\n");
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("expected"), "{e}");
    }

    #[test]
    fn type_error_has_line_and_field() {
        let e = err(&format!(
            "{TWO}[[links]]\na = \"a\"\nb = \"b\"\nmtu = \"big\"\n"
        ));
        assert_eq!(e.field, "links[0].mtu");
        assert_eq!(e.line, Some(8));
        assert!(
            e.to_string()
                .starts_with("line 8, column 7: links[0].mtu: invalid type"),
            "{e}"
        );
    }

    #[test]
    fn unknown_field_is_named() {
        let e = err(&format!(
            "{TWO}[[links]]\na = \"a\"\nb = \"b\"\nmut = 9000\n"
        ));
        assert_eq!(e.line, Some(8));
        assert!(e.message.contains("unknown field `mut`"), "{e}");
    }

    #[test]
    fn missing_field_is_named() {
        let e = err(&format!("{TWO}[[links]]\na = \"a\"\n"));
        assert_eq!(e.field, "links[0]");
        assert_eq!(e.line, Some(5));
        assert!(e.message.contains("missing field `b`"), "{e}");
    }

    #[test]
    fn unknown_host_names_the_field_and_the_hosts() {
        let e = err(&format!(
            "{TWO}[[links]]\na = \"a\"\nb = \"b\"\n[[links]]\na = \"a\"\nb = \"r2\"\n"
        ));
        assert_eq!(e.field, "links[1].b");
        assert_eq!(e.line, Some(10));
        assert_eq!(
            e.to_string(),
            "line 10, column 5: links[1].b: unknown host \"r2\": the hosts are \"a\", \"b\""
        );
    }

    #[test]
    fn semantic_errors_name_field_and_fix() {
        let link = |extra: &str| format!("{TWO}[[links]]\na = \"a\"\nb = \"b\"\n{extra}\n");
        let cases: &[(&str, &str, &str)] = &[
            ("rate = \"100\"", "links[0].rate", "no unit"),
            ("mtu = 40", "links[0].mtu", "out of range"),
            ("subnet = \"10.0.0.0/24\"", "links[0].subnet", "outside 198.18.0.0/15"),
            ("subnet = \"198.18.1.0/31\"", "links[0].subnet", "/30 or shorter"),
            ("a_addr = \"198.18.1.1\"", "links[0].a_addr", "needs its subnet"),
            ("subnet = \"198.18.1.0/24\"\na_addr = \"198.18.2.1\"", "links[0].a_addr", "not a host address"),
            ("loss = 1.5", "links[0].loss", "out of range"),
            ("loss = { probability = 0.1, protocol = \"sctp\" }", "links[0].loss.protocol", "unknown variant"),
            ("direction = \"up\"", "links[0].direction", "unknown variant"),
            ("shaper = \"htb\"", "links[0].shaper", "needs a rate"),
            ("rate = \"1mbit\"\nshaper = \"tbf\"\nshape_band = { lo = 1, hi = 2, rate = \"1kbit\" }", "links[0].shaper", "tbf has no classes"),
            ("shape_band = { lo = 100, hi = 200, rate = \"1kbit\" }", "links[0].rate", "add `rate"),
            ("rate = \"1mbit\"\nshape_band = { lo = 300, hi = 200, rate = \"1kbit\" }", "links[0].shape_band", "20 ≤ lo ≤ hi"),
            ("rate = \"10mbit\"\n[[links.classes]]\npriority = 1\nrate = \"1mbit\"\nprio = 9", "links[0].classes[0].prio", "0 (first) to 7"),
            ("rate = \"10mbit\"\n[[links.classes]]\npriority = 1\nrate = \"2mbit\"\nceil = \"1mbit\"", "links[0].classes[0].ceil", "at least the rate"),
            ("rate = \"10mbit\"\n[[links.classes]]\npriority = 1\nrate = \"1mbit\"\n[[links.classes]]\npriority = 1\nrate = \"1mbit\"", "links[0].classes[1].priority", "its own priority"),
            ("offloads = { \"TSO!\" = true }", "links[0].offloads.TSO!", "ethtool feature"),
            ("offloads = { tso = \"maybe\" }", "links[0].offloads.tso", "\"on\" or \"off\""),
        ];
        for (extra, field, needle) in cases {
            let e = err(&link(extra));
            assert_eq!(&e.field, field, "for {extra:?}: {e}");
            assert!(e.message.contains(needle), "for {extra:?}: {e}");
            assert!(e.line.is_some(), "for {extra:?}: {e}");
        }
    }

    #[test]
    fn topology_level_errors() {
        assert!(err("").message.contains("no hosts"));
        let e = err("[[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"a\"\n");
        assert_eq!(e.field, "hosts[1].name");
        assert!(e.message.contains("defined twice"));
        let e = err("[[hosts]]\nname = \"a b\"\n");
        assert!(e.message.contains("not a usable host name"));
        let e = err(&format!("{TWO}[[links]]\na = \"a\"\nb = \"a\"\n"));
        assert!(e.message.contains("two different hosts"));
        let e = err(&format!(
            "{TWO}[[links]]\na = \"a\"\nb = \"b\"\n[[links]]\na = \"a\"\nb = \"b\"\n"
        ));
        assert_eq!(e.field, "links[1].name");
        assert!(e.message.contains("add `name"), "{e}");
        let e = err(&format!(
            "{TWO}[[links]]\na = \"a\"\nb = \"b\"\nsubnet = \"198.18.0.0/16\"\n[[links]]\nname = \"x\"\na = \"a\"\nb = \"b\"\nsubnet = \"198.18.5.0/24\"\n"
        ));
        assert_eq!(e.field, "links[1].subnet");
        assert!(e.message.contains("overlaps"));
    }

    #[test]
    fn tunnel_errors() {
        let base = format!("{TWO}[[hosts]]\nname = \"c\"\n[[links]]\na = \"a\"\nb = \"b\"\n[[links]]\na = \"b\"\nb = \"c\"\n");
        let e = err(&format!("{base}[[tunnels]]\na = \"a\"\nb = \"c\"\n"));
        assert_eq!(e.field, "tunnels[0]");
        assert!(e.message.contains("router = true"), "{e}");
        let e = err(&format!(
            "{base}[[tunnels]]\na = \"a\"\nb = \"c\"\nvia = [\"b\"]\n"
        ));
        assert_eq!(e.field, "tunnels[0].via[0]");
        assert!(e.message.contains("does not forward"), "{e}");
        let e = err(&format!(
            "{base}[[tunnels]]\nkind = \"gre\"\na = \"a\"\nb = \"b\"\n"
        ));
        assert_eq!(e.field, "tunnels[0].kind");
        let e = err(&format!(
            "{base}[[tunnels]]\na = \"a\"\nb = \"b\"\n[[tunnels]]\na = \"a\"\nb = \"b\"\nvni = 100\n"
        ));
        assert_eq!(e.field, "tunnels[1].vni");
        let e = err(&format!(
            "{base}[[tunnels]]\na = \"a\"\nb = \"b\"\nvni = 0\n"
        ));
        assert!(e.message.contains("1–16777215"));
    }

    #[test]
    fn garbage_never_panics() {
        let samples = [
            "\u{0}\u{1}\u{2}",
            "[[[",
            "hosts = 3",
            "hosts = [1, 2]",
            "[[hosts]]\nname = \"\"",
            "[[hosts]]\nname = \"a\"\n[[links]]\na = \"a\"\nb = \"a\"\nrate = \"1e400mbit\"",
            "[[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"b\"\n[[links]]\na = \"a\"\nb = \"b\"\nloss = \"x\"",
            "[[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"b\"\n[[links]]\na = \"a\"\nb = \"b\"\nmtu = -1",
            "[[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"b\"\n[[links]]\na = \"a\"\nb = \"b\"\nsubnet = \"198.18.0.0/-3\"",
            "[[hosts]]\nname = \"é\"",
        ];
        for s in samples {
            assert!(parse_text(s, None).is_err(), "{s:?} parsed");
        }
    }

    #[test]
    fn load_names_a_missing_file() {
        let e = Topology::load(Path::new("/nonexistent/topo.toml")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("/nonexistent/topo.toml"));
    }

    #[test]
    fn errors_from_files_carry_the_file_name() {
        let e = parse_text("[[hosts]]\nnam = \"a\"\n", Some(Path::new("x.toml"))).unwrap_err();
        assert!(e.to_string().starts_with("x.toml:2:1: "), "{e}");
    }
}
