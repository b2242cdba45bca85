//! Colours in the text table, on a terminal only: the header bold, rows that missed the
//! precision target or stopped early yellow, failures and anomalies red. Written through
//! anstream, which drops every style when the stream (stdout, or -o) is not a terminal, when `NO_COLOR` is set
//! (non-empty) or `TERM=dumb` (and forces them with `CLICOLOR_FORCE`): files and pipes never
//! get an escape sequence.

use anstyle::{AnsiColor, Style};
use std::io::Write;

const HEADER: Style = Style::new().bold();
const MISSED: Style = AnsiColor::Yellow.on_default();
const BAD: Style = AnsiColor::Red.on_default().bold();

/// The style of one line of the text table, if it has one.
fn style_of(line: &str) -> Option<Style> {
    let l = line.trim_start();
    if l.starts_with("netsweep ") {
        Some(HEADER)
    } else if l.starts_with("anomal") || l.contains(" failed") || l.contains("timed out") {
        Some(BAD)
    } else if l.contains(" ~ ") || l.contains("did not reach") || l.starts_with("warning") {
        Some(MISSED)
    } else {
        None
    }
}

/// Writes text-table output to `out`, styled line by line where a style applies; `out` is an
/// anstream stream, which keeps or drops the styles as its terminal and environment say.
pub fn write_table(out: &mut dyn Write, text: &str) -> std::io::Result<()> {
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        match style_of(body) {
            Some(s) => write!(out, "{s}{body}{s:#}{nl}")?,
            None => write!(out, "{body}{nl}")?,
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_get_the_style_of_what_they_say() {
        assert_eq!(style_of("netsweep 0.1.0 · tcp pingpong"), Some(HEADER));
        assert_eq!(style_of("   1024  5.0  ~ time budget spent"), Some(MISSED));
        assert_eq!(style_of("3 of 9 points did not reach ±2.0%"), Some(MISSED));
        assert_eq!(style_of("anomaly: dip at 1000..1100"), Some(BAD));
        assert_eq!(style_of("   1024  5.0  1.2%"), None);
    }
}
