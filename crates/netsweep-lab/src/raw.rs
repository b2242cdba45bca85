//! The topology file exactly as written (serde, with source spans), before validation.

use crate::topology::{Direction, Protocol, ShaperKind};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use toml::Spanned;

/// The top level of a topology file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTopology {
    #[serde(default)]
    pub ipv6: bool,
    #[serde(default)]
    pub hosts: Vec<Spanned<RawHost>>,
    #[serde(default)]
    pub links: Vec<Spanned<RawLink>>,
    #[serde(default)]
    pub tunnels: Vec<Spanned<RawTunnel>>,
}

/// `[[hosts]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHost {
    pub name: Spanned<String>,
    #[serde(default)]
    pub router: bool,
}

/// `[[links]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub name: Option<Spanned<String>>,
    pub a: Spanned<String>,
    pub b: Spanned<String>,
    pub mtu: Option<Spanned<u32>>,
    pub subnet: Option<Spanned<String>>,
    pub a_addr: Option<Spanned<String>>,
    pub b_addr: Option<Spanned<String>>,
    pub rate: Option<Spanned<String>>,
    pub shaper: Option<Spanned<ShaperKind>>,
    pub direction: Option<Direction>,
    #[serde(default)]
    pub offloads: Option<Spanned<BTreeMap<String, OnOff>>>,
    #[serde(default)]
    pub classes: Vec<Spanned<RawClass>>,
    pub loss: Option<Spanned<RawLoss>>,
    pub shape_band: Option<Spanned<RawBand>>,
    pub emulate: Option<Spanned<crate::emulation::RawEmulate>>,
}

/// `[[links.classes]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClass {
    pub priority: u32,
    pub rate: Spanned<String>,
    pub ceil: Option<Spanned<String>>,
    pub prio: Option<Spanned<u8>>,
}

/// `loss = 0.01` or `loss = { probability = 0.01, protocol = "udp", direction = "a-to-b" }`.
#[derive(Debug)]
pub(crate) struct RawLoss {
    pub probability: f64,
    pub protocol: Option<Protocol>,
    pub direction: Option<Direction>,
}

/// The table form of `loss`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLossTable {
    probability: f64,
    protocol: Option<Protocol>,
    direction: Option<Direction>,
}

impl<'de> Deserialize<'de> for RawLoss {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawLoss;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a probability (e.g. 0.01) or a table { probability = 0.01, protocol = \"udp\", direction = \"a-to-b\" }",
                )
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawLoss, E> {
                Ok(RawLoss {
                    probability: v,
                    protocol: None,
                    direction: None,
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawLoss, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawLoss, E> {
                self.visit_f64(v as f64)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawLoss, A::Error> {
                let t = RawLossTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawLoss {
                    probability: t.probability,
                    protocol: t.protocol,
                    direction: t.direction,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// `shape_band = { lo = 1000, hi = 1100, rate = "1mbit" }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBand {
    pub lo: u16,
    pub hi: u16,
    pub rate: Spanned<String>,
}

/// `[[tunnels]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTunnel {
    pub name: Option<Spanned<String>>,
    #[serde(default = "vxlan")]
    pub kind: Spanned<String>,
    pub a: Spanned<String>,
    pub b: Spanned<String>,
    #[serde(default)]
    pub via: Vec<Spanned<String>>,
    pub vni: Option<Spanned<u32>>,
    pub port: Option<u16>,
    pub mtu: Option<Spanned<u32>>,
    pub subnet: Option<Spanned<String>>,
    pub pmtu_discovery: Option<bool>,
}

fn vxlan() -> Spanned<String> {
    Spanned::new(0..0, "vxlan".to_string())
}

/// An offload setting: `true`/`false` or `"on"`/`"off"`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OnOff(pub bool);

impl<'de> Deserialize<'de> for OnOff {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = OnOff;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true, false, \"on\" or \"off\"")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<OnOff, E> {
                Ok(OnOff(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OnOff, E> {
                match v {
                    "on" => Ok(OnOff(true)),
                    "off" => Ok(OnOff(false)),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}
