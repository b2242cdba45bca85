//! A mesh's results (`netsweep mesh`): the N×N throughput matrix per size as text, the
//! flagged pairs and hosts, SVG heatmaps of throughput and latency, and one HTML page.

use crate::plot::svg::esc;
use netsweep_model::mesh::{MeshFlag, MeshResult, SizeMatrix};
use std::fmt::Write;

/// The sizes shown in the text summary: the first, the middle and the last measured.
fn shown(m: &MeshResult) -> Vec<&SizeMatrix> {
    let n = m.matrices.len();
    let mut idx = vec![0, n / 2, n.saturating_sub(1)];
    idx.dedup();
    idx.into_iter().filter_map(|i| m.matrices.get(i)).collect()
}

fn cell(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}"),
        None => "·".into(),
    }
}

/// What a flag says, in one line.
pub fn flag_line(f: &MeshFlag) -> String {
    let whom = if f.what == "host" {
        format!("host of rank {}", f.flow.client)
    } else {
        format!("pair {} → {}", f.flow.client, f.flow.server)
    };
    format!(
        "{whom}: below a quarter of the others' median throughput at {} of {} sizes (worst {:.0}%)",
        f.sizes_flagged,
        f.sizes_measured,
        f.worst_ratio * 100.0
    )
}

/// The text summary: header, matrices of three sizes (Mbit/s, row = client, column =
/// server), the flags.
pub fn text(m: &MeshResult) -> String {
    let mut s = String::new();
    let n = m.ranks.len();
    let _ = writeln!(
        s,
        "netsweep mesh · {} ranks · {} · {} {} over {} · {} of {} rounds · {} flows",
        n,
        m.layout,
        m.spec.transport,
        m.spec.pattern,
        m.spec.api,
        m.pairs.iter().map(|p| p.round + 1).max().unwrap_or(0),
        m.rounds,
        m.pairs.len()
    );
    for r in &m.ranks {
        let _ = writeln!(s, "  rank {:>3}: {} (server {})", r.rank, r.host, r.addr);
    }
    for sm in shown(m) {
        let _ = writeln!(
            s,
            "\nthroughput, Mbit/s, {} B (row: client rank, column: server rank)",
            sm.size
        );
        let _ = write!(s, "{:>6}", "");
        for j in 0..n {
            let _ = write!(s, " {j:>10}");
        }
        s.push('\n');
        for (i, row) in sm.throughput_mbps.iter().enumerate() {
            let _ = write!(s, "{i:>6}");
            for v in row {
                let _ = write!(s, " {:>10}", cell(*v));
            }
            s.push('\n');
        }
    }
    for p in m.pairs.iter().filter(|p| p.error.is_some()) {
        let _ = writeln!(
            s,
            "failed: {} → {}: {}",
            p.flow.client,
            p.flow.server,
            p.error.as_deref().unwrap_or("")
        );
    }
    if m.flagged.is_empty() {
        let _ = writeln!(
            s,
            "\nno pair or host stands out (flag: < 25% of the others' median)"
        );
    } else {
        s.push('\n');
        for f in &m.flagged {
            let _ = writeln!(s, "flagged: {}", flag_line(f));
        }
    }
    s
}

/// One heatmap: `cells[client][server]`, darker = larger; `None` cells grey.
pub fn heatmap(title: &str, unit: &str, cells: &[Vec<Option<f64>>]) -> String {
    let n = cells.len().max(1);
    let side = 48usize;
    let (left, top) = (70usize, 50usize);
    let w = left + n * side + 140;
    let h = top + n * side + 50;
    let max = cells
        .iter()
        .flatten()
        .flatten()
        .fold(0.0f64, |a, b| a.max(*b));
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="DejaVu Sans, sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{left}" y="22" font-size="14">{}</text><text x="{left}" y="40" fill="grey">row: client rank · column: server rank · {}</text>"#,
        esc(title),
        esc(unit)
    );
    for (i, row) in cells.iter().enumerate() {
        let y = top + i * side;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{i}</text>"#,
            left - 8,
            y + side / 2 + 4
        );
        for (j, v) in row.iter().enumerate() {
            let x = left + j * side;
            let (fill, label) = match v {
                Some(v) if max > 0.0 => {
                    let t = (v / max).clamp(0.0, 1.0);
                    let light = (95.0 - 60.0 * t) as u32;
                    (format!("hsl(210,70%,{light}%)"), cell(Some(*v)))
                }
                _ => ("#e6e6e6".to_string(), String::new()),
            };
            let _ = write!(
                s,
                r#"<rect x="{x}" y="{y}" width="{side}" height="{side}" fill="{fill}" stroke="white"/>"#
            );
            if !label.is_empty() {
                let _ = write!(
                    s,
                    r#"<text x="{}" y="{}" text-anchor="middle" font-size="10">{}</text>"#,
                    x + side / 2,
                    y + side / 2 + 4,
                    esc(&label)
                );
            }
        }
    }
    for j in 0..cells.len() {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{j}</text>"#,
            left + j * side + side / 2,
            top + n * side + 16
        );
    }
    s.push_str("</svg>");
    s
}

/// The heatmaps of every size: (file stem, SVG).
pub fn heatmaps(m: &MeshResult) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for sm in &m.matrices {
        out.push((
            format!("throughput-{}", sm.size),
            heatmap(
                &format!("Throughput at {} B ({})", sm.size, m.layout),
                "Mbit/s",
                &sm.throughput_mbps,
            ),
        ));
        if sm.latency_us.iter().flatten().any(Option::is_some) {
            out.push((
                format!("latency-{}", sm.size),
                heatmap(
                    &format!("Latency at {} B ({})", sm.size, m.layout),
                    "µs, p50 (RTT/2 or connect)",
                    &sm.latency_us,
                ),
            ));
        }
    }
    out
}

/// One self-contained HTML page: the summary, the flags and every heatmap inline.
pub fn page(m: &MeshResult) -> String {
    let mut s = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>netsweep mesh</title>\
         <style>body{font-family:sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em}\
         .flag{color:#a00}</style></head><body><h1>netsweep mesh</h1>",
    );
    let _ = write!(s, "<pre>{}</pre>", esc(&text(m)));
    if !m.flagged.is_empty() {
        s.push_str("<h2>Flagged</h2><ul>");
        for f in &m.flagged {
            let _ = write!(s, "<li class=\"flag\">{}</li>", esc(&flag_line(f)));
        }
        s.push_str("</ul>");
    }
    s.push_str("<h2>Heatmaps</h2>");
    for (_, svg) in heatmaps(m) {
        s.push_str(&svg);
        s.push('\n');
    }
    s.push_str("</body></html>\n");
    s
}
