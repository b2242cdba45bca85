//! TOML text → serde type, with errors that name the line, column and field path.

use crate::error::SpecError;
use serde::de::DeserializeOwned;
use std::path::Path;

/// Parses `text` into `T`. Syntax errors carry the line and column; type errors also the field
/// path (`links[1].mtu`).
pub(crate) fn parse<T: DeserializeOwned>(text: &str, file: Option<&Path>) -> Result<T, SpecError> {
    let de = toml::Deserializer::parse(text).map_err(|e| from_toml(text, file, "", &e))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = clean_path(&e.path().to_string());
        from_toml(text, file, &path, e.inner())
    })
}

/// Drops the segments that `toml::Spanned` adds (`$__serde_spanned_private_value`) and the
/// `?` of an unknown path.
fn clean_path(path: &str) -> String {
    let mut out = String::new();
    for seg in path.split('.') {
        if seg.contains("$__") || seg == "?" {
            // Spanned's private field may carry an index suffix: keep it.
            if let Some(i) = seg.find('[') {
                out.push_str(&seg[i..]);
            }
            continue;
        }
        if !out.is_empty() && !seg.starts_with('[') {
            out.push('.');
        }
        out.push_str(seg);
    }
    out
}

fn from_toml(text: &str, file: Option<&Path>, field: &str, e: &toml::de::Error) -> SpecError {
    let mut err = SpecError::new(field, e.message().trim().to_string()).in_file(file);
    if let Some(span) = e.span() {
        err = err.at(text, span.start);
    }
    err
}

/// Where a `toml::Spanned` value starts, as a byte offset.
pub(crate) fn start<T>(s: &toml::Spanned<T>) -> usize {
    s.span().start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleans_spanned_segments() {
        assert_eq!(
            clean_path("links[0].$__serde_spanned_private_value.mtu"),
            "links[0].mtu"
        );
        assert_eq!(
            clean_path("links[0].$__serde_spanned_private_value"),
            "links[0]"
        );
        assert_eq!(clean_path("hosts[2].router"), "hosts[2].router");
        assert_eq!(clean_path("?"), "");
    }
}
