//! Opening a session with a netsweep server: the control connection, hello/welcome (and the
//! key's challenge), the pattern's data path, `data_ready → data_bound`, and this thread
//! pinned to the client's `--cpu`. The measured run and each background flow open theirs
//! here.

use super::RunContext;
use crate::auth;
use crate::control::ClientControl;
use crate::error::NetError;
use crate::hostinfo;
use crate::meter::pin_current_thread;
use crate::pattern::{self, ClientOpen, ClientPattern};
use netsweep_endpoint::TransportFactory;
use netsweep_model::spec::{Pattern, RunSpec};
use netsweep_proto::messages::{ClientMsg, GrantedKnobs, HostInfo, ServerMsg};
use std::time::Duration;

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
    crate::control::join_class(
        ctl.stream(),
        spec.client_knobs.tos,
        spec.client_knobs.priority,
    );
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
    if let Some(pin) = &ctx.tls_pin {
        // The data path accepts the announced certificate only, so this makes it the pinned one.
        let announced = data.tls_fingerprint.as_deref().unwrap_or("none");
        if announced != pin {
            return Err(NetError::Refused(format!(
                "the server announced TLS certificate {announced}, not {pin} (--tls-pin): \
                 another server answered, or it was restarted without its --tls-cert"
            )));
        }
    }
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
    check_server_applied(spec, &client_granted, &server_granted)?;
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

/// Refuses, by name, a knob the server was asked for and did not read back where the client
/// did (so it applies to the transport): a netsweep that predates the knob drops it unseen,
/// and its results must not look as if it was set. Every knob read back only when asked is
/// listed here: (the client read it back, the server was asked, the server read it back).
fn check_server_applied(
    spec: &RunSpec,
    client: &GrantedKnobs,
    server: &GrantedKnobs,
) -> Result<(), NetError> {
    let asked = &spec.server_knobs;
    for (flag, applies, wanted, read) in [
        (
            "--notsent-lowat",
            client.notsent_lowat.is_some(),
            asked.notsent_lowat.is_some(),
            server.notsent_lowat.is_some(),
        ),
        (
            "--pacing-rate",
            client.pacing_rate.is_some(),
            asked.pacing_rate.is_some(),
            server.pacing_rate.is_some(),
        ),
    ] {
        if applies && wanted && !read {
            return Err(NetError::Refused(format!(
                "the server did not apply {flag} (a netsweep that predates it): upgrade \
                 netsweep on the server, or drop {flag}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netsweep_model::spec::{Family, Transport};

    #[test]
    fn a_server_that_drops_notsent_lowat_is_refused_by_name() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Stream, Family::Ipv4);
        spec.server_knobs.notsent_lowat = Some(16384);
        let set = GrantedKnobs {
            notsent_lowat: Some(16384),
            ..Default::default()
        };
        let dropped = GrantedKnobs::default();
        let e = check_server_applied(&spec, &set, &dropped).unwrap_err();
        assert!(e.to_string().contains("--notsent-lowat"), "{e}");
        assert!(check_server_applied(&spec, &set, &set).is_ok());
        // Not a knob of the transport (the client did not set it either): its note says so.
        assert!(check_server_applied(&spec, &dropped, &dropped).is_ok());
        spec.server_knobs.notsent_lowat = None;
        assert!(check_server_applied(&spec, &set, &dropped).is_ok());
    }

    #[test]
    fn a_server_that_drops_the_pacing_rate_is_refused_by_name() {
        let mut spec = RunSpec::new(Transport::Tcp, Pattern::Stream, Family::Ipv4);
        spec.server_knobs.pacing_rate = Some(200_000_000);
        let set = GrantedKnobs {
            pacing_rate: Some(200_000_000),
            ..Default::default()
        };
        let e = check_server_applied(&spec, &set, &GrantedKnobs::default()).unwrap_err();
        assert!(e.to_string().contains("--pacing-rate"), "{e}");
        assert!(check_server_applied(&spec, &set, &set).is_ok());
    }
}
