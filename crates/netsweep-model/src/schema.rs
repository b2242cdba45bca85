//! The results file's JSON Schema, generated from the Rust types (schemars), so it cannot
//! drift from what `netsweep run` writes. `docs/schema/netsweep-result.schema.json` is this
//! schema committed; a test keeps the two equal and validates results files against it.

use crate::results::RunResult;

/// The JSON Schema (draft 2020-12) of a results file.
pub fn results_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(RunResult).to_value();
    if let Some(o) = schema.as_object_mut() {
        o.insert(
            "description".into(),
            "One netsweep run: its spec, both hosts, the knobs granted, every point measured. \
             Generated from netsweep-model's types; schema_version says which revision."
                .into(),
        );
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_names_the_top_level_fields() {
        let s = results_schema();
        let props = s["properties"].as_object().unwrap();
        for field in [
            "schema",
            "schema_version",
            "spec",
            "points",
            "status",
            "granted",
        ] {
            assert!(props.contains_key(field), "{field}");
        }
        assert_eq!(s["title"], "RunResult");
    }
}
