//! Whether a lab shapes the two directions of a link differently — when it does, a pingpong's
//! RTT/2 is not a one-way time and its throughput (size ÷ RTT/2) is neither direction's rate
//! (NPtcp reported 182 Mbit/s across a link shaped to 100 Mbit/s one way). Read from the lab
//! description a run records (`--lab-meta`: links with their shapers, `toward` a host, `rate`
//! in bit/s), so a run says so itself.

use serde_json::Value;

/// One description per link whose directions are shaped differently, e.g.
/// `link client-server: client→server 100 Mbit/s, server→client unshaped`.
pub fn lab_asymmetries(lab: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for link in lab["links"].as_array().into_iter().flatten() {
        let (Some(a), Some(b)) = (link["a"]["host"].as_str(), link["b"]["host"].as_str()) else {
            continue;
        };
        let rate_toward = |to: &str| -> Option<u64> {
            link["shapers"]
                .as_array()?
                .iter()
                .find(|s| s["toward"].as_str() == Some(to))
                .and_then(|s| s["rate"].as_u64())
        };
        let (ab, ba) = (rate_toward(b), rate_toward(a));
        if ab != ba {
            let name = link["name"].as_str().unwrap_or("?");
            found.push(format!(
                "link {name}: {a}→{b} {}, {b}→{a} {}",
                shown(ab),
                shown(ba)
            ));
        }
    }
    found
}

fn shown(rate: Option<u64>) -> String {
    match rate {
        None => "unshaped".into(),
        Some(r) if r % 1_000_000 == 0 => format!("{} Mbit/s", r / 1_000_000),
        Some(r) => format!("{:.3} Mbit/s", r as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn link(shapers: Value) -> Value {
        json!({"links": [{"name": "c-s", "a": {"host": "c"}, "b": {"host": "s"}, "shapers": shapers}]})
    }

    #[test]
    fn one_way_and_unequal_shaping_are_found_equal_is_not() {
        let one_way = link(json!([{"toward": "s", "rate": 100_000_000}]));
        assert_eq!(
            lab_asymmetries(&one_way),
            ["link c-s: c→s 100 Mbit/s, s→c unshaped"]
        );
        let unequal = link(json!([
            {"toward": "s", "rate": 100_000_000},
            {"toward": "c", "rate": 2_500_000}
        ]));
        assert_eq!(
            lab_asymmetries(&unequal),
            ["link c-s: c→s 100 Mbit/s, s→c 2.500 Mbit/s"]
        );
        let equal = link(json!([
            {"toward": "s", "rate": 5_000_000},
            {"toward": "c", "rate": 5_000_000}
        ]));
        assert!(lab_asymmetries(&equal).is_empty());
        assert!(lab_asymmetries(&link(json!([]))).is_empty());
        assert!(lab_asymmetries(&json!({"anything": 1})).is_empty());
    }
}
