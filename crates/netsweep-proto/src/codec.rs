//! Messages as JSON frame bodies: encode a message into a whole frame, decode a body back.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::ProtoError;
use crate::frame::encode_frame;
use crate::messages::{ClientMsg, ServerMsg};

/// Serializes `msg` to JSON and frames it (length header included).
pub fn encode_message<M: Serialize>(msg: &M) -> Result<Vec<u8>, ProtoError> {
    let body = serde_json::to_vec(msg).map_err(|e| ProtoError::malformed(&e))?;
    encode_frame(&body)
}

/// Parses one frame body (without its length header) into a message.
///
/// Bad JSON, an unknown `type` or a missing required field is [`ProtoError::Malformed`];
/// unknown fields are ignored.
pub fn decode_message<M: DeserializeOwned>(body: &[u8]) -> Result<M, ProtoError> {
    serde_json::from_slice(body).map_err(|e| ProtoError::malformed(&e))
}

impl ClientMsg {
    /// The wire name of this message's `type`, e.g. `"trial_start"`.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientMsg::Hello { .. } => "hello",
            ClientMsg::AuthResponse { .. } => "auth_response",
            ClientMsg::DataReady {} => "data_ready",
            ClientMsg::TrialStart { .. } => "trial_start",
            ClientMsg::TrialEnd { .. } => "trial_end",
            ClientMsg::Bye {} => "bye",
        }
    }

    /// The kind plus the trial number where there is one, for error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            ClientMsg::TrialStart { trial, .. } | ClientMsg::TrialEnd { trial, .. } => {
                format!("{} for trial {trial}", self.kind())
            }
            _ => self.kind().to_string(),
        }
    }
}

impl ServerMsg {
    /// The wire name of this message's `type`, e.g. `"trial_report"`.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerMsg::AuthChallenge { .. } => "auth_challenge",
            ServerMsg::Welcome { .. } => "welcome",
            ServerMsg::Busy { .. } => "busy",
            ServerMsg::Error { .. } => "error",
            ServerMsg::DataBound { .. } => "data_bound",
            ServerMsg::Ready { .. } => "ready",
            ServerMsg::TrialReport { .. } => "trial_report",
            ServerMsg::Bye {} => "bye",
        }
    }

    /// The kind plus the trial number where there is one, for error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            ServerMsg::Ready { trial } | ServerMsg::TrialReport { trial, .. } => {
                format!("{} for trial {trial}", self.kind())
            }
            _ => self.kind().to_string(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::frame::{FrameDecoder, LEN_BYTES};
    use crate::messages::*;
    use serde_json::{json, Value};

    /// One of every client message, with non-default contents.
    pub(crate) fn all_client_msgs() -> Vec<ClientMsg> {
        vec![
            ClientMsg::Hello {
                setup: SessionSetup {
                    transport: "tcp".into(),
                    api: "basic".into(),
                    pattern: "pingpong".into(),
                    family: "ipv4".into(),
                    max_size: 65536,
                    server_knobs: Knobs {
                        nodelay: Some(true),
                        ..Knobs::default()
                    },
                    timeout_ns: 5_000_000_000,
                    reverse: true,
                    flows: 4,
                    threads: 2,
                    one_way: true,
                },
                client: HostInfo {
                    tool: "netsweep".into(),
                    cpu_count: 2,
                    ..HostInfo::default()
                },
                client_nonce: None,
            },
            ClientMsg::DataReady {},
            ClientMsg::TrialStart {
                trial: 1,
                spec: TrialSpec {
                    size: 1024,
                    repetitions: 100,
                    ..TrialSpec::default()
                },
            },
            ClientMsg::TrialEnd {
                trial: 1,
                counters: SideCounters {
                    bytes_sent: 102400,
                    ..SideCounters::default()
                },
            },
            ClientMsg::Bye {},
            ClientMsg::AuthResponse {
                client_proof: "ab".repeat(32),
            },
        ]
    }

    /// One of every server message, with non-default contents.
    pub(crate) fn all_server_msgs() -> Vec<ServerMsg> {
        vec![
            ServerMsg::Welcome {
                server: HostInfo {
                    hostname: "srv".into(),
                    ..HostInfo::default()
                },
                cookie: 0xdead_beef,
                data: DataEndpoint {
                    port: 4000,
                    ..DataEndpoint::default()
                },
            },
            ServerMsg::Busy {
                message: "serving 10.0.0.1".into(),
            },
            ServerMsg::Error {
                message: "size too large".into(),
            },
            ServerMsg::DataBound {
                granted: GrantedKnobs {
                    sndbuf: Some(212992),
                    notes: vec!["clamped".into()],
                    ..GrantedKnobs::default()
                },
            },
            ServerMsg::Ready { trial: 1 },
            ServerMsg::TrialReport {
                trial: 1,
                counters: SideCounters {
                    bytes_received: 102400,
                    datagrams: Some(DatagramCounters {
                        received: 3,
                        ..DatagramCounters::default()
                    }),
                    ..SideCounters::default()
                },
            },
            ServerMsg::Bye {},
            ServerMsg::AuthChallenge {
                server_nonce: "01".repeat(32),
                server_proof: "cd".repeat(32),
            },
        ]
    }

    /// Adds unknown fields at the top level and in every nested struct (skipping the
    /// free-form maps, where any key is legitimate data).
    fn add_unknown_fields(v: &mut Value) {
        if let Value::Object(map) = v {
            for (key, child) in map.iter_mut() {
                if !matches!(key.as_str(), "extra" | "sysctls" | "offloads") {
                    add_unknown_fields(child);
                }
            }
            map.insert("from_the_future".into(), json!({"x": [1, 2, 3]}));
        }
    }

    fn body_of(frame: &[u8]) -> &[u8] {
        &frame[LEN_BYTES..]
    }

    #[test]
    fn every_message_round_trips_through_a_frame() {
        let mut dec = FrameDecoder::new();
        for msg in all_client_msgs() {
            dec.push(&encode_message(&msg).unwrap()).unwrap();
            let back: ClientMsg = decode_message(&dec.pop().unwrap()).unwrap();
            assert_eq!(back, msg);
        }
        for msg in all_server_msgs() {
            dec.push(&encode_message(&msg).unwrap()).unwrap();
            let back: ServerMsg = decode_message(&dec.pop().unwrap()).unwrap();
            assert_eq!(back, msg);
        }
    }

    #[test]
    fn wire_names_match_kind() {
        for msg in all_client_msgs() {
            let v: Value = serde_json::from_slice(body_of(&encode_message(&msg).unwrap())).unwrap();
            assert_eq!(v["type"], msg.kind());
        }
        for msg in all_server_msgs() {
            let v: Value = serde_json::from_slice(body_of(&encode_message(&msg).unwrap())).unwrap();
            assert_eq!(v["type"], msg.kind());
        }
    }

    #[test]
    fn unknown_fields_are_tolerated_in_every_message() {
        for msg in all_client_msgs() {
            let mut v = serde_json::to_value(&msg).unwrap();
            add_unknown_fields(&mut v);
            let back: ClientMsg = decode_message(&serde_json::to_vec(&v).unwrap()).unwrap();
            assert_eq!(back, msg, "{}", msg.kind());
        }
        for msg in all_server_msgs() {
            let mut v = serde_json::to_value(&msg).unwrap();
            add_unknown_fields(&mut v);
            let back: ServerMsg = decode_message(&serde_json::to_vec(&v).unwrap()).unwrap();
            assert_eq!(back, msg, "{}", msg.kind());
        }
    }

    #[test]
    fn missing_optional_fields_default() {
        let hello: ClientMsg =
            decode_message(br#"{"type":"hello","setup":{"transport":"udp"},"client":{}}"#).unwrap();
        assert_eq!(
            hello,
            ClientMsg::Hello {
                setup: SessionSetup {
                    transport: "udp".into(),
                    ..SessionSetup::default()
                },
                client: HostInfo::default(),
                client_nonce: None,
            }
        );
        let start: ClientMsg =
            decode_message(br#"{"type":"trial_start","trial":4,"spec":{"size":8}}"#).unwrap();
        assert_eq!(
            start,
            ClientMsg::TrialStart {
                trial: 4,
                spec: TrialSpec {
                    size: 8,
                    repetitions: 0,
                    duration_ns: 0,
                    warmup: false,
                    interval_ns: 0,
                },
            }
        );
        let report: ServerMsg =
            decode_message(br#"{"type":"trial_report","trial":4,"counters":{}}"#).unwrap();
        assert_eq!(
            report,
            ServerMsg::TrialReport {
                trial: 4,
                counters: SideCounters::default(),
            }
        );
        let bound: ServerMsg =
            decode_message(br#"{"type":"data_bound","granted":{"notes":["x"]}}"#).unwrap();
        assert_eq!(
            bound,
            ServerMsg::DataBound {
                granted: GrantedKnobs {
                    notes: vec!["x".into()],
                    ..GrantedKnobs::default()
                },
            }
        );
        let bye: ClientMsg = decode_message(br#"{"type":"bye"}"#).unwrap();
        assert_eq!(bye, ClientMsg::Bye {});
    }

    #[test]
    fn bad_bodies_are_typed_errors() {
        for body in [
            &b""[..],
            b"not json",
            b"{\"type\":",
            b"[1,2,3]",
            b"{}",
            b"{\"type\":\"frobnicate\"}",
            b"{\"type\":\"ready\"}",
            b"{\"type\":\"ready\",\"trial\":-1}",
            b"\xff\xfe",
        ] {
            let err = decode_message::<ServerMsg>(body).unwrap_err();
            assert!(
                matches!(err, ProtoError::Malformed { .. }),
                "{body:?} gave {err:?}"
            );
        }
        let err = decode_message::<ClientMsg>(br#"{"type":"frobnicate"}"#).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("malformed control message: unknown variant `frobnicate`"));
        assert!(text.ends_with("the peer is not a compatible netsweep"));
    }
}
