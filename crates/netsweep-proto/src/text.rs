//! Text that came from a peer, made safe to print: a server's refusal on the client's
//! terminal, a client's bytes quoted in the server's log. Control characters (which could
//! move a terminal's cursor, forge a log line or hide text) are written as escapes, and the
//! length is capped.

use std::fmt::Write;

/// The most characters of peer text shown in one message or log line.
pub const MAX_SHOWN: usize = 512;

/// `s` with every control character (C0, DEL, C1) and bidirectional-override character
/// escaped (`\n`, `\u{1b}`, …), cut to [`MAX_SHOWN`] characters with a note of how many more
/// there were.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_SHOWN + 32));
    for (shown, (i, c)) in s.char_indices().enumerate() {
        if shown == MAX_SHOWN {
            let _ = write!(out, "… ({} more bytes)", s.len() - i);
            break;
        }
        if c.is_control() || is_bidi_control(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters that reorder how a terminal displays the text around them (Trojan Source).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_plain_text_kept() {
        assert_eq!(printable("busy: try later"), "busy: try later");
        assert_eq!(printable("café ±2 %"), "café ±2 %");
        assert_eq!(
            printable("x\n2026-11-25T00:00:00Z netsweep serve: forged\x1b[2J\u{9b}\u{202e}"),
            "x\\n2026-11-25T00:00:00Z netsweep serve: forged\\u{1b}[2J\\u{9b}\\u{202e}"
        );
    }

    #[test]
    fn long_text_is_cut_with_the_count_left_out() {
        let s = "a".repeat(MAX_SHOWN + 100);
        let p = printable(&s);
        assert!(p.starts_with(&"a".repeat(MAX_SHOWN)));
        assert!(p.ends_with("… (100 more bytes)"), "{p}");
        assert_eq!(printable(&"a".repeat(MAX_SHOWN)), "a".repeat(MAX_SHOWN));
    }
}
