//! The server says Ready only once its data thread is armed (issue 9, item 6): a server
//! whose data thread is slow to start a trial must still time the receiver from before the
//! client's first byte. The server's endpoints here take 300 ms in the per-trial meter read
//! that precedes arming, so a Ready sent before arming lets the client stream into the
//! socket buffers while the receiver's clock has not started.

use netsweep_endpoint::{DataListener, Endpoint, EndpointStats, TransportFactory};
use netsweep_engine::control::ClientControl;
use netsweep_engine::pattern::stream;
use netsweep_engine::server::{serve, trial_cookie, ServeOptions};
use netsweep_proto::messages::{
    ClientMsg, DataEndpoint, GrantedKnobs, Knobs, ServerMsg, SessionSetup, TrialSpec,
};
use netsweep_transport::Registry;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ARM_DELAY: Duration = Duration::from_millis(300);

/// A server endpoint whose `stats` (read by the trial meter before arming) is slow.
struct SlowArm(Box<dyn Endpoint>);

impl Endpoint for SlowArm {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.send(buf)
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.recv(buf)
    }
    fn is_datagram(&self) -> bool {
        self.0.is_datagram()
    }
    fn set_recv_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        self.0.set_recv_timeout(t)
    }
    fn granted(&self) -> GrantedKnobs {
        self.0.granted()
    }
    fn prepare(&mut self, max: usize, batch: usize) -> io::Result<()> {
        self.0.prepare(max, batch)
    }
    fn stats(&mut self) -> EndpointStats {
        std::thread::sleep(ARM_DELAY);
        self.0.stats()
    }
}

struct SlowListener(Box<dyn DataListener>);

impl DataListener for SlowListener {
    fn endpoint(&self) -> DataEndpoint {
        self.0.endpoint()
    }
    fn accept(&mut self, cookie: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        Ok(Box::new(SlowArm(self.0.accept(cookie, timeout)?)))
    }
}

struct SlowFactory;

impl TransportFactory for SlowFactory {
    fn listen(
        &self,
        setup: &SessionSetup,
        bind: IpAddr,
        peer: IpAddr,
    ) -> io::Result<Box<dyn DataListener>> {
        Ok(Box::new(SlowListener(Registry.listen(setup, bind, peer)?)))
    }
    fn connect(
        &self,
        setup: &SessionSetup,
        knobs: &Knobs,
        server: IpAddr,
        data: &DataEndpoint,
        cookie: u64,
        timeout: Duration,
    ) -> io::Result<Box<dyn Endpoint>> {
        Registry.connect(setup, knobs, server, data, cookie, timeout)
    }
}

#[test]
fn receiver_epoch_precedes_ready_even_when_the_data_thread_is_slow() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let opts = ServeOptions {
        once: true,
        tool_version: "test".into(),
        ..ServeOptions::in_process()
    };
    let server = std::thread::spawn({
        let stop = stop.clone();
        move || serve(listener, Arc::new(SlowFactory), opts, stop)
    });

    let timeout = Duration::from_secs(10);
    let mut ctl = ClientControl::connect(addr, timeout).unwrap();
    let setup = SessionSetup {
        transport: "tcp".into(),
        api: "basic".into(),
        pattern: "stream".into(),
        family: "ipv4".into(),
        max_size: 8192,
        timeout_ns: timeout.as_nanos() as u64,
        ..Default::default()
    };
    let hello = ClientMsg::Hello {
        setup: setup.clone(),
        client: Default::default(),
        client_nonce: None,
    };
    let ServerMsg::Welcome { cookie, data, .. } = ctl.request(hello, "welcome", None).unwrap()
    else {
        panic!("no welcome");
    };
    let mut ep = Registry
        .connect(&setup, &Knobs::default(), addr.ip(), &data, cookie, timeout)
        .unwrap();
    let bound = ctl.request(ClientMsg::DataReady {}, "bound", None).unwrap();
    assert!(matches!(bound, ServerMsg::DataBound { .. }), "{bound:?}");

    let size = 8192;
    let mut buf = vec![0u8; size];
    for trial in 1..=2u64 {
        let spec = TrialSpec {
            size: size as u64,
            duration_ns: 100_000_000,
            ..Default::default()
        };
        let ready = ctl
            .request(ClientMsg::TrialStart { trial, spec }, "ready", None)
            .unwrap();
        assert_eq!(ready, ServerMsg::Ready { trial });
        let t_ready = Instant::now();
        let sent = stream::sender_trial(
            ep.as_mut(),
            &mut buf,
            size,
            1,
            Duration::from_millis(100),
            trial_cookie(cookie, trial),
            &mut Default::default(),
            &AtomicBool::new(false),
        )
        .unwrap();
        // Every byte was sent after Ready arrived, and the last one was received after it
        // was sent: an armed receiver's span covers at least the client's sending span.
        let client_span = t_ready.elapsed().as_nanos() as u64;
        let report = ctl
            .request(
                ClientMsg::TrialEnd {
                    trial,
                    counters: sent.clone(),
                },
                "report",
                Some(timeout),
            )
            .unwrap();
        let ServerMsg::TrialReport { counters, .. } = report else {
            panic!("no report: {report:?}");
        };
        assert_eq!(counters.bytes_received, sent.bytes_sent);
        assert!(
            counters.recv_span_ns * 2 >= client_span,
            "trial {trial}: the receiver's span ({} ns) is far shorter than the client's \
             sending span after Ready ({client_span} ns): Ready went out before the data \
             thread was armed",
            counters.recv_span_ns
        );
    }
    ctl.send(ClientMsg::Bye {}).unwrap();
    server.join().unwrap().unwrap();
}
