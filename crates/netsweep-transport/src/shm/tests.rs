//! Tests of the shm ring against a peer that writes impossible positions: each must be an
//! error, never a panic or a copy outside the ring.

use super::*;

const CAP: u64 = MIN_CAPACITY;

/// A listener of a `CAP`-byte ring, its file's path, and a third mapping of that file.
fn listener_with_spy() -> (ShmListener, std::path::PathBuf, Mapping) {
    let setup = SessionSetup {
        transport: "shm".into(),
        server_knobs: Knobs {
            sndbuf: Some(CAP),
            ..Default::default()
        },
        timeout_ns: 5_000_000_000,
        ..Default::default()
    };
    let listener = ShmListener::open(&setup).unwrap();
    let path = listener.path.clone();
    let fd = open_file(&path, false).unwrap();
    let spy = Mapping::map(fd, HEADER + 2 * CAP as usize).unwrap();
    close(fd);
    (listener, path, spy)
}

/// A connected (server, client) pair with a third mapping of the same file, through which
/// a test plays a misbehaving peer. Ring 0 carries client → server.
fn pair() -> (Box<dyn Endpoint>, Box<dyn Endpoint>, Mapping) {
    let (mut listener, path, spy) = listener_with_spy();
    let client =
        std::thread::spawn(move || connect(&path, &Knobs::default(), 42, Duration::from_secs(5)));
    let mut server = listener.accept(42, Duration::from_secs(5)).unwrap();
    let client = client.join().unwrap().unwrap();
    server
        .set_recv_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    (server, client, spy)
}

fn assert_corrupt(r: io::Result<usize>) {
    let e = r.expect_err("an impossible position must be an error");
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    assert!(e.to_string().contains("restart both sides"), "{e}");
}

#[test]
fn bytes_cross_a_ring_smaller_than_the_message_intact() {
    let (mut server, mut client, _spy) = pair();
    let msg: Vec<u8> = (0..3 * CAP as usize + 123)
        .map(|i| (i % 251) as u8)
        .collect();
    let expect = msg.clone();
    let sender = std::thread::spawn(move || {
        let mut off = 0;
        while off < msg.len() {
            off += client.send(&msg[off..]).unwrap();
        }
        client
    });
    let mut got = vec![0u8; expect.len()];
    let mut off = 0;
    while off < got.len() {
        off += server.recv(&mut got[off..]).unwrap();
    }
    assert_eq!(got, expect);
    drop(sender.join().unwrap());
}

#[test]
fn a_producer_position_more_than_a_ring_ahead_is_an_error() {
    let (mut server, _client, spy) = pair();
    spy.header().rings[0]
        .tail
        .pos
        .store(3 * CAP, Ordering::SeqCst);
    let mut buf = vec![0u8; 2 * CAP as usize];
    assert_corrupt(server.recv(&mut buf));
}

#[test]
fn a_producer_position_going_backwards_is_an_error() {
    let (mut server, mut client, spy) = pair();
    assert_eq!(client.send(&[7u8; 100]).unwrap(), 100);
    let mut buf = vec![0u8; 100];
    assert_eq!(server.recv(&mut buf).unwrap(), 100);
    spy.header().rings[0].tail.pos.store(50, Ordering::SeqCst);
    assert_corrupt(server.recv(&mut buf));
}

#[test]
fn a_consumer_position_past_the_producer_is_an_error() {
    let (_server, mut client, spy) = pair();
    // Fill the ring: the next send must read the consumer's position.
    let full = vec![1u8; CAP as usize];
    assert_eq!(client.send(&full).unwrap(), CAP as usize);
    spy.header().rings[0]
        .head
        .pos
        .store(1_000_000, Ordering::SeqCst);
    assert_corrupt(client.send(&[2u8; 10]));
}

#[test]
fn a_consumer_position_moved_while_the_producer_sleeps_is_checked() {
    let (_server, mut client, spy) = pair();
    let full = vec![1u8; CAP as usize];
    assert_eq!(client.send(&full).unwrap(), CAP as usize);
    // The producer waits for room; the "peer" then writes a position behind the old one.
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let r = &spy.header().rings[0];
        r.head.pos.store(u64::MAX, Ordering::SeqCst);
        signal(&r.head.ev);
        spy
    });
    assert_corrupt(client.send(&[2u8; 10]));
    drop(writer.join().unwrap());
}

#[test]
fn a_corrupt_ring_at_bind_time_is_an_error() {
    let (mut listener, path, spy) = listener_with_spy();
    // Ring 1 (server → client) says the client consumed bytes nobody produced.
    spy.header().rings[1].head.pos.store(9, Ordering::SeqCst);
    let client =
        std::thread::spawn(move || connect(&path, &Knobs::default(), 42, Duration::from_secs(5)));
    for r in [
        listener.accept(42, Duration::from_secs(5)),
        client.join().unwrap(),
    ] {
        let Err(e) = r else {
            panic!("bound to a corrupt ring");
        };
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }
}
