//! The metadata of each run side by side: tool, spec, knobs asked and granted, both hosts
//! (kernel, CPU, interfaces and MTU, sysctls) and placement — one column per run.

use crate::legend::Named;
use crate::plot::svg::esc;
use netsweep_model::results::RunResult;
use netsweep_proto::messages::HostInfo;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Non-null fields of a serialisable value as `key=value` lines.
fn kv(v: &impl serde::Serialize) -> String {
    let Ok(serde_json::Value::Object(m)) = serde_json::to_value(v) else {
        return String::new();
    };
    m.into_iter()
        .filter(|(_, v)| !v.is_null() && v != &serde_json::json!([]) && v != &serde_json::json!({}))
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn interfaces(h: &HostInfo) -> String {
    h.interfaces
        .iter()
        .map(|i| {
            format!(
                "{} mtu {}{}{}",
                i.name,
                i.mtu,
                i.qdisc
                    .as_deref()
                    .map(|q| format!(" qdisc {q}"))
                    .unwrap_or_default(),
                if i.addresses.is_empty() {
                    String::new()
                } else {
                    format!(" {}", i.addresses.join(" "))
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn placement(r: &RunResult) -> String {
    let (same, obs) = r.points.iter().fold((0u64, 0u64), |(s, o), p| {
        (
            s + p.placement.same_cpu_trials as u64,
            o + p.placement.observed_trials as u64,
        )
    });
    let mixed = r.points.iter().filter(|p| p.placement.mixed()).count();
    let mut s = if obs == 0 {
        "not recorded".to_string()
    } else {
        format!(
            "both ends on one CPU in {same} of {obs} trials ({:.0}%)",
            same as f64 * 100.0 / obs as f64
        )
    };
    if mixed > 0 {
        let _ = write!(s, "\nplacement varied within {mixed} point(s)");
    }
    if let Some(c) = r.granted.client.cpu {
        let _ = write!(s, "\nclient pinned to CPU {c}");
    }
    if let Some(c) = r.granted.server.cpu {
        let _ = write!(s, "\nserver pinned to CPU {c}");
    }
    s
}

fn host_rows(rows: &mut Vec<(String, Vec<String>)>, side: &str, hosts: &[&HostInfo]) {
    let mut add = |k: &str, f: &dyn Fn(&HostInfo) -> String| {
        rows.push((format!("{side} {k}"), hosts.iter().map(|h| f(h)).collect()));
    };
    add("hostname", &|h| h.hostname.clone());
    add("kernel", &|h| h.kernel.clone());
    add("CPU", &|h| format!("{} × {}", h.cpu_count, h.cpu_model));
    add("interfaces", &interfaces);
    let keys: BTreeSet<&String> = hosts.iter().flat_map(|h| h.sysctls.keys()).collect();
    for k in keys {
        rows.push((
            format!("{side} {k}"),
            hosts
                .iter()
                .map(|h| h.sysctls.get(k).cloned().unwrap_or_default())
                .collect(),
        ));
    }
}

/// The side-by-side metadata table.
pub fn table(runs: &[Named<'_>], labels: &[String]) -> String {
    let r: Vec<&RunResult> = runs.iter().map(|n| n.run).collect();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |k: &str, f: &dyn Fn(&RunResult) -> String| {
        rows.push((k.to_string(), r.iter().map(|x| f(x)).collect()));
    };
    add("tool", &|x| format!("{} {}", x.tool.name, x.tool.version));
    add("status", &|x| {
        format!(
            "{}{}",
            serde_json::to_value(x.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            x.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        )
    });
    add("started", &|x| x.started_at.clone());
    add("finished", &|x| x.finished_at.clone().unwrap_or_default());
    add("peer", &|x| x.peer.clone());
    add("transport / api / pattern", &|x| {
        format!(
            "{} / {} / {} ({})",
            x.spec.transport,
            x.spec.api.name(),
            x.spec.pattern,
            x.spec.family.name()
        )
    });
    add("sizes", &|x| {
        format!("{} ({} sizes)", x.spec.sizes_spec, x.spec.sizes.len())
    });
    add("repetitions", &|x| {
        let s = &x.spec;
        format!(
            "precision ±{:.1}%, trials of {} ms, {}–{} trials, {} ms per point{}",
            s.precision * 100.0,
            s.trial_time_ns / 1_000_000,
            s.min_trials,
            s.max_trials,
            s.max_point_time_ns / 1_000_000,
            if s.warmup { ", warm-up" } else { "" }
        )
    });
    add("client knobs", &|x| kv(&x.spec.client_knobs));
    add("server knobs", &|x| kv(&x.spec.server_knobs));
    add("granted (client)", &|x| kv(&x.granted.client));
    add("granted (server)", &|x| kv(&x.granted.server));
    add("placement", &placement);
    add("lab", &|x| {
        x.lab.as_ref().map(|l| l.to_string()).unwrap_or_default()
    });
    let clients: Vec<&HostInfo> = r.iter().map(|x| &x.client).collect();
    let servers: Vec<&HostInfo> = r.iter().map(|x| &x.server).collect();
    host_rows(&mut rows, "client", &clients);
    host_rows(&mut rows, "server", &servers);

    let mut o = String::from("<table class=\"meta\">\n<tr><th></th>");
    for (n, l) in runs.iter().zip(labels) {
        let _ = write!(o, "<th>{}<br><small>{}</small></th>", esc(l), esc(n.name));
    }
    o.push_str("</tr>\n");
    for (k, vals) in rows {
        if vals.iter().all(String::is_empty) {
            continue;
        }
        let differ = vals.iter().any(|v| v != &vals[0]);
        let _ = write!(
            o,
            "<tr{}><th>{}</th>",
            if differ { " class=\"differs\"" } else { "" },
            esc(&k)
        );
        for v in vals {
            let _ = write!(o, "<td>{}</td>", esc(&v).replace('\n', "<br>"));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o
}
