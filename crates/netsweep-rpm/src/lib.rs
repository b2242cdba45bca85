//! netsweep-rpm: responsiveness under working conditions (draft-ietf-ippm-responsiveness-09)
//! over HTTP/2 and TLS — the client of `netsweep rpm` ([`client`]), which loads a path with
//! more and more connections until its goodput saturates and probes it meanwhile, and the
//! server `netsweep serve --rpm` answers any responsiveness client with ([`server`]): the
//! draft's configuration document ([`config`]) and its large, small and upload endpoints. The
//! arithmetic (trimmed means, stability, the RPM formula) is `netsweep_model::rpm`.

pub mod client;
pub mod config;
pub mod server;
mod sock;
mod zeros;
