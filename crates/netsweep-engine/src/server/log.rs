//! The server's log on stderr: one line per connection event — a session's start, end or
//! failure, a refusal, a server error — with a UTC timestamp, the session number,
//! the peer and the reason; as text for people or as one JSON object per line for machines
//! (`serve --log-format json`). Writing never fails a session: a closed stderr is ignored.

use netsweep_model::time::rfc3339;
use std::io::Write;
use std::net::SocketAddr;
use std::time::SystemTime;

/// How the server's log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `2026-11-23T06:12:00Z netsweep serve: session 3 from 10.0.0.2:40112 ended`.
    #[default]
    Text,
    /// `{"ts":"2026-11-23T06:12:00Z","event":"session_end","session":3,"peer":"10.0.0.2:40112"}`.
    Json,
}

/// What happened to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Event {
    /// A session was admitted and starts.
    SessionStart,
    /// A session ended normally (`bye`).
    SessionEnd,
    /// A session, or a connection before it became one, failed (reason given).
    SessionFailed,
    /// A connection was refused at admission (a limit; reason given).
    Refused,
    /// The server itself hit an error (accept, thread start).
    Error,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::SessionStart => "session_start",
            Event::SessionEnd => "session_end",
            Event::SessionFailed => "session_failed",
            Event::Refused => "refused",
            Event::Error => "error",
        }
    }
}

/// Writes one event. `session` and `peer` are None when unknown.
pub(super) fn log(
    format: LogFormat,
    event: Event,
    session: Option<u64>,
    peer: Option<SocketAddr>,
    reason: Option<&str>,
) {
    // A reason may quote the peer (its hello, a decoder's error): escaped and capped, so a
    // client can neither forge log lines nor send a terminal escape to whoever reads them.
    let reason = reason.map(netsweep_proto::text::printable);
    let reason = reason.as_deref();
    let line = render(
        format,
        &rfc3339(SystemTime::now()),
        event,
        session,
        peer,
        reason,
    );
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn render(
    format: LogFormat,
    ts: &str,
    event: Event,
    session: Option<u64>,
    peer: Option<SocketAddr>,
    reason: Option<&str>,
) -> String {
    match format {
        LogFormat::Json => {
            let mut o = serde_json::Map::new();
            o.insert("ts".into(), ts.into());
            o.insert("event".into(), event.name().into());
            if let Some(n) = session {
                o.insert("session".into(), n.into());
            }
            if let Some(p) = peer {
                o.insert("peer".into(), p.to_string().into());
            }
            if let Some(r) = reason {
                o.insert("reason".into(), r.into());
            }
            serde_json::Value::Object(o).to_string()
        }
        LogFormat::Text => {
            let who = match (session, peer) {
                (Some(n), Some(p)) => format!("session {n} from {p}"),
                (Some(n), None) => format!("session {n}"),
                (None, Some(p)) => p.to_string(),
                (None, None) => String::new(),
            };
            let what = match event {
                Event::SessionStart => match reason {
                    Some(r) => format!("{who}: {r}"),
                    None => who,
                },
                Event::SessionEnd => match reason {
                    Some(r) => format!("{who} ended: {r}"),
                    None => format!("{who} ended"),
                },
                Event::SessionFailed => format!("{who} failed: {}", reason.unwrap_or("?")),
                Event::Refused => format!("refused {who}: {}", reason.unwrap_or("?")),
                Event::Error if who.is_empty() => reason.unwrap_or("?").to_string(),
                Event::Error => format!("{who}: {}", reason.unwrap_or("?")),
            };
            format!("{ts} netsweep serve: {what}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_lines() {
        let p: SocketAddr = "10.0.0.2:40112".parse().unwrap();
        let ts = "2026-11-23T06:12:00Z";
        assert_eq!(
            render(
                LogFormat::Text,
                ts,
                Event::SessionEnd,
                Some(3),
                Some(p),
                None
            ),
            "2026-11-23T06:12:00Z netsweep serve: session 3 from 10.0.0.2:40112 ended"
        );
        assert_eq!(
            render(
                LogFormat::Text,
                ts,
                Event::Refused,
                None,
                Some(p),
                Some("limit \"x\"")
            ),
            "2026-11-23T06:12:00Z netsweep serve: refused 10.0.0.2:40112: limit \"x\""
        );
        let j: serde_json::Value = serde_json::from_str(&render(
            LogFormat::Json,
            ts,
            Event::Refused,
            None,
            Some(p),
            Some("limit \"x\"\nnext"),
        ))
        .unwrap();
        assert_eq!(j["event"], "refused");
        assert_eq!(j["peer"], "10.0.0.2:40112");
        assert_eq!(j["reason"], "limit \"x\"\nnext");
        assert!(j.get("session").is_none());
    }
}
