//! A session with a netsweep server as the measurement loop's peer: opening it (control
//! connection, hello/welcome and the key's challenge, the pattern's data path) and, per
//! trial, the exchange that arms and ends it around the pattern's client loop, with the
//! run's background flows loading the path during every trial.

use super::background::Background;
use super::peer::Peer;
use super::RunContext;
use crate::auth;
use crate::control::ClientControl;
use crate::error::NetError;
use crate::hostinfo;
use crate::meter::{pin_current_thread, TrialMeter};
use crate::pattern::{self, ClientOpen, ClientPattern, TrialOutcome};
use netsweep_endpoint::TransportFactory;
use netsweep_model::background::BackgroundFigures;
use netsweep_model::results::DatagramTotals;
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_proto::messages::{ClientMsg, GrantedKnobs, HostInfo, ServerMsg, TrialSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A session as opened: the control connection, the pattern with its data path bound on
/// both sides, and what each side said about itself.
pub(crate) struct Session {
    pub(super) ctl: ClientControl,
    pub(super) cookie: u64,
    pub(super) pattern: Box<dyn ClientPattern>,
    pub(super) client_info: HostInfo,
    pub(super) server_info: HostInfo,
    pub(super) client_granted: GrantedKnobs,
    pub(super) server_granted: GrantedKnobs,
}

/// Opens a session for `spec`: control connection, hello/welcome (and the key's challenge),
/// the pattern's data path, `data_ready → data_bound`, and this thread pinned to the
/// client's `--cpu`. The measured run and each background flow open theirs this way.
pub(super) fn open_session(
    spec: &RunSpec,
    ctx: &RunContext<'_>,
    factory: &dyn TransportFactory,
) -> Result<Session, NetError> {
    let registration = pattern::registration_for(spec.pattern, spec.flows).ok_or_else(|| {
        NetError::Refused(format!("this build has no pattern {}", spec.pattern.name()))
    })?;
    let timeout = Duration::from_nanos(spec.timeout_ns);
    let mut ctl = ClientControl::connect(ctx.server, timeout)?;
    check_protocol(ctl.version(), spec, ctx)?;
    let setup = spec.session_setup();
    let client_info = hostinfo::collect(ctx.tool_version);
    let client_nonce = match &ctx.auth_key {
        Some(_) => Some(auth::nonce()?),
        None => None,
    };
    let during = "waiting for the server's welcome";
    let reply = ctl.request(
        ClientMsg::Hello {
            setup: setup.clone(),
            client: client_info.clone(),
            client_nonce: client_nonce
                .as_ref()
                .map(netsweep_proto::auth::encode_nonce),
        },
        during,
        None,
    )?;
    let reply = auth::client_answer(
        &mut ctl,
        ctx.auth_key.as_ref(),
        client_nonce.as_ref(),
        reply,
        during,
    )?;
    let (server_info, cookie, data) = match reply {
        ServerMsg::Welcome {
            server,
            cookie,
            data,
        } => (server, cookie, data),
        other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
    };
    let data_ip = ctl
        .stream()
        .peer_addr()
        .map_err(|e| NetError::io("control connection", e))?
        .ip();
    // The pattern opens its own data path: a connected endpoint, or (crr) a connector that
    // prepares one connection per transaction.
    let mut pattern = (registration.client)(&ClientOpen {
        factory,
        setup: &setup,
        spec,
        knobs: &spec.client_knobs,
        server: data_ip,
        data: &data,
        cookie,
        timeout,
    })?;
    let server_granted = match ctl.request(
        ClientMsg::DataReady {},
        "waiting for the data path to be bound",
        None,
    )? {
        ServerMsg::DataBound { granted } => granted,
        other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
    };
    let mut client_granted = pattern.granted();
    if let Some(cpu) = spec.client_knobs.cpu {
        pin_current_thread(cpu)
            .map_err(|m| NetError::Refused(format!("client side --cpu: {m}")))?;
        client_granted.cpu = Some(cpu);
    }
    Ok(Session {
        ctl,
        cookie,
        pattern,
        client_info,
        server_info,
        client_granted,
        server_granted,
    })
}

/// Refuses, with the reason, a run that needs more than the server's protocol version: a
/// version-1 server (an older netsweep) ignores `reverse` and knows neither bidir nor
/// authentication, so the run would otherwise wait for data that never comes.
fn check_protocol(version: u16, spec: &RunSpec, ctx: &RunContext<'_>) -> Result<(), NetError> {
    let needs_2 = [
        (spec.reverse, "--reverse"),
        (spec.pattern == Pattern::Bidir, "the bidir pattern"),
        (ctx.auth_key.is_some(), "--auth-key"),
    ];
    let needs_3 = [(spec.flows > 1, "--flows")];
    let needs = needs_2
        .iter()
        .map(|&(needed, what)| (needed, what, 2))
        .chain(needs_3.iter().map(|&(needed, what)| (needed, what, 3)));
    for (needed, what, since) in needs {
        if needed && version < since {
            return Err(NetError::Refused(format!(
                "the server speaks netsweep protocol {version} (an older netsweep), which has no \
                 {what}: upgrade netsweep on the server"
            )));
        }
    }
    Ok(())
}

/// The measured session's side of every trial: its control connection, the background
/// flows, and the datagram totals it keeps.
pub(super) struct SessionPeer<'a> {
    pub(super) ctl: &'a mut ClientControl,
    pub(super) bg: &'a mut Background,
    pub(super) interrupt: &'a AtomicBool,
    /// The session's inactivity timeout.
    pub(super) timeout: Duration,
    /// Every datagram of the run, warm-ups included, per direction.
    pub(super) totals: DatagramTotals,
}

impl Peer for SessionPeer<'_> {
    type Pattern = dyn ClientPattern;

    /// Runs one trial with the server: start, the client's loop, end, both sides' counters.
    fn trial(
        &mut self,
        pattern: &mut Self::Pattern,
        trial: u64,
        spec: &TrialSpec,
    ) -> Result<TrialOutcome, NetError> {
        // Background load starts before the trial is armed and stops after its report.
        self.bg.start_trial()?;
        pattern.arm(trial);
        let asked = Instant::now();
        match self.ctl.request(
            ClientMsg::TrialStart {
                trial,
                spec: spec.clone(),
            },
            "waiting for the server to arm the trial",
            None,
        )? {
            ServerMsg::Ready { .. } => {}
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        }
        let control_rtt_ns = asked.elapsed().as_nanos() as u64;
        let meter = TrialMeter::start(pattern.stats());
        let t0 = Instant::now();
        let body_result = pattern.run_trial(trial, spec);
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let mut client = body_result.map_err(|e| self.data_error(e))?;
        meter.finish(|| pattern.stats(), &mut client);
        // The server may still be draining a stream: allow it the full timeout and more.
        let wait = self.timeout + Duration::from_secs(2);
        let server = match self.ctl.request(
            ClientMsg::TrialEnd {
                trial,
                counters: client.clone(),
            },
            "waiting for the server's trial report",
            Some(wait),
        )? {
            ServerMsg::TrialReport { counters, .. } => counters,
            other => return Err(NetError::Refused(format!("unexpected reply {other:?}"))),
        };
        pattern
            .complete(&server, &mut client)
            .map_err(|e| self.data_error(e))?;
        self.bg.stop_trial(!spec.warmup)?;
        if pattern.is_datagram() {
            let t = &mut self.totals;
            t.trials += 1;
            t.to_server_sent += client.messages_sent;
            t.to_client_sent += server.messages_sent;
            t.to_client_received += client.messages_received;
            t.to_server_send_errors += client.send_errors.total();
            t.to_client_send_errors += server.send_errors.total();
            t.to_server_socket_drops += server.socket_drops.unwrap_or(0);
            t.to_client_socket_drops += client.socket_drops.unwrap_or(0);
            // Distinct datagrams when the server de-duplicated them (stream), else all it got.
            t.to_server_received += server
                .datagrams
                .as_ref()
                .map_or(server.messages_received, |d| d.received);
        }
        Ok(TrialOutcome {
            client,
            server,
            wall_ns,
            control_rtt_ns,
        })
    }

    fn begin_point(&mut self) {
        self.bg.begin_point();
    }

    fn background(&self) -> Vec<BackgroundFigures> {
        self.bg.figures()
    }

    fn datagram_totals(&mut self, pattern: &mut Self::Pattern) -> Option<DatagramTotals> {
        pattern.is_datagram().then_some(self.totals)
    }
}

impl SessionPeer<'_> {
    /// What a data-path error of the client's loop means for the run.
    fn data_error(&self, e: std::io::Error) -> NetError {
        if e.kind() == std::io::ErrorKind::Interrupted && self.interrupt.load(Ordering::Relaxed) {
            // Ctrl-C interrupted a blocking call: the user asked to stop.
            NetError::Interrupted
        } else if netsweep_endpoint::is_timeout(&e) {
            // A bare timeout was a receive; a loop's own timeout says what it saw.
            let during = e
                .get_ref()
                .map_or("waiting for data from the server".into(), |m| {
                    format!("running the trial's data path ({m})")
                });
            NetError::Timeout {
                secs: self.timeout.as_secs_f64(),
                during,
            }
        } else {
            NetError::io("data path", e)
        }
    }
}
