//! A scenario's `[[factor]]` tables: what each varies (a `netsweep run` argument, arguments
//! per level, the client count, the path, or a property of the lab), its levels with their
//! readable labels and numeric positions, and the lab a lab-property level builds.

use crate::names::is_simple_name;
use crate::rate::Rate;
use crate::topology::Topology;
use netsweep_model::experiment::{Factor, FactorKind, Level};
use serde::Deserialize;
use toml::{Spanned, Value};

/// A `[[factor]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFactor {
    pub name: Spanned<String>,
    pub label: Option<String>,
    pub arg: Option<Spanned<String>>,
    pub clients: Option<bool>,
    pub via: Option<bool>,
    pub lab: Option<Spanned<String>>,
    pub levels: Spanned<Vec<Value>>,
    pub labels: Option<Spanned<Vec<String>>>,
}

/// Arguments the runner passes itself.
const RESERVED: &[&str] = &["-o", "--output", "--lab-meta"];

/// A value as the command line would write it: strings as they are, numbers in decimal,
/// booleans as on/off.
pub(crate) fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(if *b { "on" } else { "off" }.to_string()),
        _ => None,
    }
}

/// Lower-case letters and digits joined by '-': a file-name part.
pub(crate) fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    out.chars()
        .take(24)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// A level's position on a numeric axis: a number, a size (`64k`) or a rate (`100mbit`).
fn position(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Float(f) if f.is_finite() => Some(*f),
        Value::String(s) => {
            let t = s.trim();
            if !t.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            if let Ok(sz) = netsweep_model::sizes::parse_sizes(t) {
                return (sz.len() == 1).then(|| sz[0] as f64);
            }
            Rate::parse(t).ok().map(|r| r.bits_per_sec as f64)
        }
        _ => None,
    }
}

/// Converts one factor; `Err((byte offset, message))`.
pub(crate) fn factor(raw: &RawFactor, topology: &Topology) -> Result<Factor, (usize, String)> {
    let name = raw.name.get_ref();
    let at = |s: &Spanned<String>| s.span().start;
    if !is_simple_name(name, 32) {
        return Err((
            at(&raw.name),
            format!("\"{name}\" cannot name a factor: use letters, digits, '-' or '_'"),
        ));
    }
    if matches!(name.as_str(), "run" | "size") {
        return Err((
            at(&raw.name),
            format!("\"{name}\" is taken (claims select by run and size): call the factor something else"),
        ));
    }
    let kinds = [
        raw.arg.is_some(),
        raw.clients == Some(true),
        raw.via == Some(true),
        raw.lab.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() > 1 {
        return Err((
            at(&raw.name),
            "a factor varies one thing: give only one of arg, clients, via and lab".into(),
        ));
    }
    let kind = if let Some(a) = &raw.arg {
        let flag = a.get_ref().trim().to_string();
        if !flag.starts_with('-') || flag.len() < 2 || flag.contains(char::is_whitespace) {
            return Err((at(a), format!("arg = \"{flag}\" is not a flag: write it as on the command line, e.g. \"--sndbuf\"")));
        }
        if RESERVED.contains(&flag.as_str()) {
            return Err((
                at(a),
                format!("\"{flag}\" is the runner's own: vary another argument"),
            ));
        }
        FactorKind::Arg { flag }
    } else if raw.clients == Some(true) {
        FactorKind::Clients
    } else if raw.via == Some(true) {
        FactorKind::Via
    } else if let Some(p) = &raw.lab {
        check_lab_path(p.get_ref(), topology).map_err(|m| (at(p), m))?;
        FactorKind::Lab {
            path: p.get_ref().clone(),
        }
    } else {
        FactorKind::Args
    };
    let levels_at = raw.levels.span().start;
    let values = raw.levels.get_ref();
    if values.is_empty() {
        return Err((
            levels_at,
            "a factor needs levels: levels = [\"a\", \"b\"]".into(),
        ));
    }
    if let Some(l) = &raw.labels {
        if l.get_ref().len() != values.len() {
            return Err((
                l.span().start,
                format!(
                    "{} labels for {} levels: give one label per level",
                    l.get_ref().len(),
                    values.len()
                ),
            ));
        }
    }
    let mut levels: Vec<Level> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let label = raw.labels.as_ref().map(|l| l.get_ref()[i].clone());
        let level = level(&kind, v, label, topology)
            .map_err(|m| (levels_at, format!("levels[{i}]: {m}")))?;
        if let Some(dup) = levels.iter().find(|l| l.name == level.name) {
            return Err((
                levels_at,
                format!("levels[{i}]: two levels are called \"{}\": give them distinct names (name = …)", dup.name),
            ));
        }
        levels.push(level);
    }
    Ok(Factor {
        name: name.clone(),
        label: raw.label.clone().unwrap_or_else(|| name.clone()),
        kind,
        levels,
    })
}

fn level(
    kind: &FactorKind,
    v: &Value,
    label: Option<String>,
    topology: &Topology,
) -> Result<Level, String> {
    let (mut name, mut label, mut value, mut extra, mut x) = (None, label, None, Vec::new(), None);
    match v {
        Value::Table(t) => {
            for (k, val) in t {
                match k.as_str() {
                    "name" => name = Some(val.as_str().ok_or("name must be a string")?.to_string()),
                    "label" => {
                        label = Some(val.as_str().ok_or("label must be a string")?.to_string())
                    }
                    "value" => value = Some(val.clone()),
                    "x" => {
                        x = Some(match val {
                            Value::Integer(i) => *i as f64,
                            Value::Float(f) if f.is_finite() => *f,
                            _ => {
                                return Err(
                                    "x must be a number (the level's place on the axis)".into()
                                )
                            }
                        })
                    }
                    "args" => {
                        let a = val.as_array().ok_or("args must be a list of strings")?;
                        for s in a {
                            extra.push(
                                s.as_str()
                                    .ok_or("args must be a list of strings")?
                                    .to_string(),
                            );
                        }
                    }
                    other => {
                        return Err(format!(
                            "unknown key \"{other}\": a level has name, label, value, args and x"
                        ))
                    }
                }
            }
        }
        Value::Array(_) | Value::Datetime(_) if !matches!(kind, FactorKind::Lab { .. }) => {
            return Err("a level is a value or a table { name, label, value, args, x }".into())
        }
        other => value = Some(other.clone()),
    }
    if let Some(a) = extra.iter().find(|a| {
        RESERVED
            .iter()
            .any(|r| *a == r || a.starts_with(&format!("{r}=")))
    }) {
        return Err(format!(
            "remove \"{a}\": the runner writes the results and lab files itself"
        ));
    }
    let text = value.as_ref().and_then(scalar_text);
    let mut args = Vec::new();
    match kind {
        FactorKind::Arg { flag } => {
            if let Some(v) = &value {
                let t = text
                    .clone()
                    .ok_or_else(|| format!("{flag} takes one value, not {v}"))?;
                args.extend([flag.clone(), t]);
            }
        }
        FactorKind::Args => {
            if value.is_some() {
                return Err("this factor names no arg: give the level args = [...] (or set arg = \"--flag\" on the factor)".into());
            }
        }
        FactorKind::Clients => match value.as_ref().and_then(Value::as_integer) {
            Some(n) if (1..=i64::from(crate::scenario::MAX_CLIENTS)).contains(&n) => {}
            _ => {
                return Err(format!(
                    "a client count is 1 to {}",
                    crate::scenario::MAX_CLIENTS
                ))
            }
        },
        FactorKind::Via => {
            let n = text
                .clone()
                .ok_or("a path level names a link or tunnel: \"direct\"")?;
            let known = topology.links.iter().any(|l| l.name == n)
                || topology.tunnels.iter().any(|t| t.name == n);
            if !known {
                let all: Vec<&str> = topology
                    .links
                    .iter()
                    .map(|l| l.name.as_str())
                    .chain(topology.tunnels.iter().map(|t| t.name.as_str()))
                    .collect();
                return Err(format!(
                    "no link or tunnel called \"{n}\": the topology has {}",
                    netsweep_model::experiment::design::quoted(all)
                ));
            }
        }
        FactorKind::Lab { .. } => {
            if value.is_none() {
                return Err(
                    "a lab level needs a value: the property's value for that level".into(),
                );
            }
        }
    }
    args.extend(extra);
    let name = match name {
        Some(n) if is_simple_name(&n, 32) => n,
        Some(n) => return Err(format!("name \"{n}\" must be letters, digits, '-' or '_'")),
        None => match &text {
            Some(t) if is_simple_name(t, 32) => t.clone(),
            Some(t) if !slug(t).is_empty() => slug(t),
            _ => label
                .as_deref()
                .map(slug)
                .filter(|s| !s.is_empty())
                .ok_or("give the level a name (name = \"…\") or a label")?,
        },
    };
    let label = label
        .or_else(|| text.clone())
        .unwrap_or_else(|| match kind {
            FactorKind::Arg { .. } => "default".into(),
            _ => name.clone(),
        });
    let x = x.or_else(|| value.as_ref().and_then(position));
    Ok(Level {
        name,
        label,
        args,
        value: value.and_then(|v| serde_json::to_value(&v).ok()),
        x,
    })
}

/// `links.<link>.<field>` or `tunnels.<tunnel>.<field>` of a link or tunnel that exists; a
/// field may be one of a table's (`links.<link>.emulate.queue`).
fn check_lab_path(path: &str, topology: &Topology) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    let ok_field = |f: &str| !f.is_empty() && f.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    let fields_ok = parts.len() >= 3 && parts[2..].iter().all(|f| ok_field(f));
    match parts[..] {
        ["links", name, ..] if fields_ok => {
            if topology.links.iter().any(|l| l.name == name) {
                Ok(())
            } else {
                Err(format!(
                    "no link called \"{name}\": the links are {}",
                    netsweep_model::experiment::design::quoted(topology.links.iter().map(|l| l.name.as_str()))
                ))
            }
        }
        ["tunnels", name, ..] if fields_ok => {
            if topology.tunnels.iter().any(|t| t.name == name) {
                Ok(())
            } else {
                Err(format!("no tunnel called \"{name}\""))
            }
        }
        _ => Err(format!(
            "lab = \"{path}\": name a property as links.<link>.<field> (e.g. links.client-server.rate, links.client-server.emulate.delay) or tunnels.<tunnel>.<field>"
        )),
    }
}

/// The topology `base` (as TOML) with each `(path, value)` set, checked as any topology is.
pub(crate) fn variant(
    base: &toml::Table,
    topology: &Topology,
    sets: &[(&str, &Value)],
) -> Result<Topology, String> {
    let mut t = base.clone();
    for (path, value) in sets {
        let parts: Vec<&str> = path.split('.').collect();
        let [list, name, ref fields @ ..] = parts[..] else {
            return Err(format!("{path}: not a property path"));
        };
        let Some((field, tables)) = fields.split_last() else {
            return Err(format!("{path}: not a property path"));
        };
        let index = match list {
            "links" => topology.links.iter().position(|l| l.name == name),
            _ => topology.tunnels.iter().position(|l| l.name == name),
        }
        .ok_or_else(|| format!("{path}: no such {list}"))?;
        let entry = t
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .and_then(|a| a.get_mut(index))
            .and_then(Value::as_table_mut)
            .ok_or_else(|| format!("{path}: no such entry"))?;
        // Down the tables a nested field sits in (made when the base has none).
        let mut at = entry;
        for t in tables {
            at = at
                .entry(t.to_string())
                .or_insert_with(|| Value::Table(toml::Table::new()))
                .as_table_mut()
                .ok_or_else(|| format!("{path}: {t} is not a table"))?;
        }
        at.insert(field.to_string(), (*value).clone());
    }
    let text = toml::to_string(&t).map_err(|e| e.to_string())?;
    crate::parse::parse_text(&text, None).map_err(|e| {
        let sets: Vec<String> = sets.iter().map(|(p, v)| format!("{p} = {v}")).collect();
        format!("the lab with {}: {}", sets.join(", "), e.message)
    })
}

/// The topology as a TOML table: the file's, or the scenario's `[topology]`.
pub(crate) fn topology_table(text: &str, file_text: Option<&str>) -> Option<toml::Table> {
    match file_text {
        Some(t) => t.parse::<toml::Table>().ok(),
        None => text
            .parse::<toml::Table>()
            .ok()?
            .remove("topology")?
            .as_table()
            .cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_and_positions() {
        assert_eq!(slug("Band 1 (loaded)"), "band-1-loaded");
        assert_eq!(slug("--"), "");
        assert_eq!(position(&Value::String("64k".into())), Some(65536.0));
        assert_eq!(position(&Value::String("100mbit".into())), Some(1e8));
        assert_eq!(position(&Value::String("cubic".into())), None);
        assert_eq!(position(&Value::Integer(6)), Some(6.0));
        assert_eq!(scalar_text(&Value::Boolean(false)).as_deref(), Some("off"));
    }
}
