//! CSV: one row per point — one per point × flow for a `--flows` run — with a fixed set of
//! columns (empty where a figure does not apply).

use netsweep_model::results::PointResult;
use netsweep_model::spec::{Pattern, RunSpec};

/// The header row. The `latency_*` columns are RTT/2 (pingpong's one-way figure), ns; the
/// `*_cpu_us` columns are the data thread's user + system time, µs. Each figure's 95 %
/// interval (issue 39 item 7): a mean's as its half-width in the figure's unit
/// (`throughput_ci95_mbps`, `sender_ci95_mbps`, `receiver_ci95_mbps`, `latency_mean_ci95_ns`:
/// mean ± it), the loss ratio's as its Wilson score bounds (asymmetric, inside [0, 1]); empty
/// where no interval was measured. Bounds below 0 are cut at 0. Pingpong's directions
/// (issue 39 items 5 and 6): each one's delivery rate as its receiver timed it, and with
/// `--one-way` each one's least delay, ns; empty where not measured.
pub const HEADER: &str = "size,trials,repetitions,throughput_mbps,throughput_ci95_mbps,latency_p50_ns,latency_p90_ns,latency_p99_ns,latency_p999_ns,latency_mean_ns,latency_min_ns,latency_max_ns,sender_mbps,receiver_mbps,sent,received,lost,loss_ratio,reordered,duplicates,jitter_ns,client_send_calls,client_recv_calls,server_send_calls,server_recv_calls,client_cpu_us,server_cpu_us,client_service_demand_us_per_kb,server_service_demand_us_per_kb,precision_met,stop_reason,send_errors,sender_ci95_mbps,receiver_ci95_mbps,latency_mean_ci95_ns,loss_ratio_ci95_lower,loss_ratio_ci95_upper,to_server_mbps,to_client_mbps,one_way_to_server_min_ns,one_way_to_client_min_ns\n";

/// The columns a bidir run adds after [`HEADER`]'s: the server-to-client direction (the
/// `sender_mbps` … `jitter_ns` columns are then the client-to-server one).
const BIDIR: &str = "reverse_sender_mbps,reverse_receiver_mbps,reverse_sent,reverse_received,reverse_lost,reverse_loss_ratio";

/// The columns a rate run adds after [`HEADER`]'s (whose `latency_*` columns are then
/// halved like pingpong's; these are the whole reply − intended send time, ns).
const RATE: &str = "offered_rate,delivered_rate,delivered_rate_ci95,rate_sent,rate_received,rate_lost,rate_late,rate_latency_p50_ns,rate_latency_p99_ns,rate_latency_p999_ns,rate_latency_max_ns,lateness_p50_ns,lateness_p99_ns,schedule_missed";

/// The columns a `--flows` run adds after [`HEADER`]'s: the flow count, the aggregate and
/// its unit (`mbps`, `transactions_per_s` or `requests_per_s`), Jain's fairness index, the lowest and highest
/// flow, and each side's start skew across its data threads.
const FLOWS: &str = "flows,flows_aggregate,flows_unit,fairness,flow_min,flow_max,client_start_skew_ns,server_start_skew_ns";

/// The columns of one flow, after [`FLOWS`]'s: a `--flows` run has one row per point × flow
/// (the point's columns repeated on each), so `groupby("size")` gives the points back. The
/// flow's figure (unit `flows_unit`) and what each side counted on it over the timed trials.
const PER_FLOW: &str = "flow,flow_figure,flow_client_bytes_sent,flow_client_bytes_received,flow_client_messages_sent,flow_client_messages_received,flow_server_bytes_sent,flow_server_bytes_received,flow_server_messages_sent,flow_server_messages_received";

/// The header row of a run: [`HEADER`], and the second direction's columns for bidir, the
/// load's for rate, or the flows' columns for `--flows`.
pub fn header(spec: &RunSpec) -> String {
    let mut h = match spec.pattern {
        Pattern::Bidir => format!("{},{BIDIR}\n", HEADER.trim_end()),
        Pattern::Rate => format!("{},{RATE}\n", HEADER.trim_end()),
        _ if spec.flows > 1 => format!("{},{FLOWS},{PER_FLOW}\n", HEADER.trim_end()),
        _ => HEADER.to_string(),
    };
    if !spec.background.is_empty() {
        h = format!("{},{BACKGROUND}\n", h.trim_end());
    }
    h
}

/// The columns a run with `--background` adds last: every background flow's bytes received
/// and receiver rate during the point's timed trials, summed over the flows.
const BACKGROUND: &str = "background_bytes,background_mbps";

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_default()
}

/// One data row, or for a `--flows` point one row per flow.
pub fn row(p: &PointResult) -> String {
    let l = p.latency.map(|l| l.half_rtt_ns);
    let loss = p.loss;
    let wilson = loss.and_then(|x| netsweep_model::stats::wilson95(x.lost, x.sent));
    let d = p.directions;
    let cells: Vec<String> = vec![
        p.size.to_string(),
        p.trials.to_string(),
        p.repetitions.to_string(),
        format!("{:.3}", p.throughput_mbps.mean),
        p.throughput_mbps
            .ci95
            .map_or(String::new(), |c| format!("{c:.3}")),
        opt(l.map(|d| d.p50)),
        opt(l.map(|d| d.p90)),
        opt(l.map(|d| d.p99)),
        opt(l.map(|d| d.p999)),
        opt(l.map(|d| d.mean)),
        opt(l.map(|d| d.min)),
        opt(l.map(|d| d.max)),
        opt(p.sender_mbps.map(|e| e.mean)),
        opt(p.receiver_mbps.map(|e| e.mean)),
        loss.map(|x| x.sent.to_string()).unwrap_or_default(),
        loss.map(|x| x.received.to_string()).unwrap_or_default(),
        loss.map(|x| x.lost.to_string()).unwrap_or_default(),
        // Full precision: one loss in 10^5 must not print as 0.000.
        loss.map(|x| x.ratio.to_string()).unwrap_or_default(),
        loss.map(|x| x.reordered.to_string()).unwrap_or_default(),
        loss.map(|x| x.duplicates.to_string()).unwrap_or_default(),
        opt(loss.map(|x| x.jitter_ns)),
        p.client.send_calls.to_string(),
        p.client.recv_calls.to_string(),
        p.server.send_calls.to_string(),
        p.server.recv_calls.to_string(),
        format!(
            "{:.1}",
            (p.client.cpu_user_ns + p.client.cpu_sys_ns) as f64 / 1e3
        ),
        format!(
            "{:.1}",
            (p.server.cpu_user_ns + p.server.cpu_sys_ns) as f64 / 1e3
        ),
        format!("{:.4}", p.client.service_demand_us_per_kb),
        format!("{:.4}", p.server.service_demand_us_per_kb),
        p.precision_met.to_string(),
        serde_json::to_value(p.stop_reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        // Datagram sends the client's own stack refused (not in `sent`, not lost).
        loss.map(|x| x.send_errors.to_string()).unwrap_or_default(),
        opt(p.sender_mbps.and_then(|e| e.ci95)),
        opt(p.receiver_mbps.and_then(|e| e.ci95)),
        opt(l.and_then(|d| d.ci95)),
        wilson.map(|(lo, _)| lo.to_string()).unwrap_or_default(),
        wilson.map(|(_, hi)| hi.to_string()).unwrap_or_default(),
        opt(d.and_then(|d| d.to_server).map(|r| r.mbps)),
        opt(d.and_then(|d| d.to_client).map(|r| r.mbps)),
        opt(d.and_then(|d| d.one_way).map(|o| o.to_server_ns.min)),
        opt(d.and_then(|d| d.one_way).map(|o| o.to_client_ns.min)),
    ];
    let mut s = cells.join(",");
    if let Some(r) = &p.reverse {
        let loss = r.loss;
        let back = [
            format!("{:.3}", r.sender_mbps.mean),
            format!("{:.3}", r.receiver_mbps.mean),
            loss.map(|x| x.sent.to_string()).unwrap_or_default(),
            loss.map(|x| x.received.to_string()).unwrap_or_default(),
            loss.map(|x| x.lost.to_string()).unwrap_or_default(),
            loss.map(|x| x.ratio.to_string()).unwrap_or_default(),
        ];
        s.push(',');
        s.push_str(&back.join(","));
    }
    if let Some(r) = &p.rate {
        let l = p.latency.map(|l| l.rtt_ns).unwrap_or_default();
        let load = [
            format!("{:.3}", r.offered_rate),
            format!("{:.3}", r.delivered_rate.mean),
            opt(r.delivered_rate.ci95),
            r.sent.to_string(),
            r.received.to_string(),
            r.lost.to_string(),
            r.late.to_string(),
            format!("{:.3}", l.p50),
            format!("{:.3}", l.p99),
            format!("{:.3}", l.p999),
            format!("{:.3}", l.max),
            format!("{:.3}", r.lateness_ns.p50),
            format!("{:.3}", r.lateness_ns.p99),
            r.schedule_missed.to_string(),
        ];
        s.push(',');
        s.push_str(&load.join(","));
    }
    if let Some(f) = &p.flows {
        let cells = [
            f.count.to_string(),
            format!("{:.3}", f.aggregate),
            f.unit.clone(),
            format!("{:.4}", f.fairness),
            format!("{:.3}", f.min_flow),
            format!("{:.3}", f.max_flow),
            f.client_start_skew_ns.to_string(),
            f.server_start_skew_ns.to_string(),
        ];
        s.push(',');
        s.push_str(&cells.join(","));
    }
    let tail = if p.background.is_empty() {
        String::new()
    } else {
        let bytes: u64 = p.background.iter().map(|b| b.bytes_received).sum();
        let mbps: f64 = p.background.iter().map(|b| b.receiver_mbps).sum();
        format!(",{bytes},{mbps:.3}")
    };
    let Some(f) = p.flows.as_ref().filter(|f| !f.per_flow.is_empty()) else {
        return format!("{s}{tail}\n");
    };
    let mut rows = String::new();
    for (i, flow) in f.per_flow.iter().enumerate() {
        let (c, v) = (&flow.client, &flow.server);
        rows.push_str(&format!(
            "{s},{i},{:.3},{},{},{},{},{},{},{},{}{tail}\n",
            flow.figure,
            c.bytes_sent,
            c.bytes_received,
            c.messages_sent,
            c.messages_received,
            v.bytes_sent,
            v.bytes_received,
            v.messages_sent,
            v.messages_received
        ));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_carries_each_figures_interval_under_its_column() {
        let run =
            netsweep_model::results::load(include_str!("../../../tests/data/tcp-pingpong.json"))
                .unwrap();
        let cols: Vec<&str> = HEADER.trim_end().split(',').collect();
        let mut p = run
            .points
            .iter()
            .find(|p| p.latency.is_some_and(|l| l.half_rtt_ns.ci95.is_some()))
            .unwrap()
            .clone();
        p.loss = Some(netsweep_model::results::Loss {
            sent: 100,
            lost: 10,
            ..Default::default()
        });
        let row = row(&p);
        let cells: Vec<&str> = row.trim_end().split(',').collect();
        assert_eq!(cells.len(), cols.len(), "{row}");
        let cell = |name: &str| cells[cols.iter().position(|c| *c == name).unwrap()];
        let ci = p.latency.unwrap().half_rtt_ns.ci95.unwrap();
        assert_eq!(cell("latency_mean_ci95_ns"), format!("{ci:.3}"));
        let (lo, hi) = netsweep_model::stats::wilson95(10, 100).unwrap();
        assert_eq!(cell("loss_ratio_ci95_lower"), lo.to_string());
        assert_eq!(cell("loss_ratio_ci95_upper"), hi.to_string());
        assert!(!cell("throughput_ci95_mbps").is_empty());
    }
}
