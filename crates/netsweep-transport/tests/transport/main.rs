//! Every transport through the real `TransportFactory` and pattern loops: the conformance body for each (transport, api), socket knobs and apis, io_uring and shm beyond it, TLS records on the wire. (`hung_tools.rs` and `signals.rs` stay binaries of their own: one sets PATH, the other installs a signal handler, for its whole process.)

mod common;

mod conformance;
mod knobs_and_apis;
mod quic;
mod tls;
mod uring_shm;
