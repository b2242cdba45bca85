//! CSV: one row per point, a fixed set of columns (empty where a figure does not apply).

use netsweep_core::results::PointResult;

/// The header row.
pub const HEADER: &str = "size,trials,repetitions,throughput_mbps,throughput_ci95_mbps,latency_p50_ns,latency_p90_ns,latency_p99_ns,latency_p999_ns,latency_mean_ns,latency_min_ns,latency_max_ns,sender_mbps,receiver_mbps,sent,received,lost,loss_ratio,reordered,duplicates,jitter_ns,client_send_calls,client_recv_calls,server_send_calls,server_recv_calls,client_cpu_us,server_cpu_us,client_service_demand_us_per_kb,server_service_demand_us_per_kb,precision_met,stop_reason,send_errors\n";

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_default()
}

/// One data row.
pub fn row(p: &PointResult) -> String {
    let l = p.latency.map(|l| l.half_rtt_ns);
    let loss = p.loss;
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
        opt(loss.map(|x| x.ratio)),
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
    ];
    let mut s = cells.join(",");
    s.push('\n');
    s
}
