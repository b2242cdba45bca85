#!/usr/bin/env python3
"""aioquic (PyPI) at one end of the QUIC performance protocol (ALPN "perf",
draft-banks-quic-performance), for netsweep's interoperability tests: a QUIC stack netsweep
did not write, against netsweep's own.

  aioquic_perf.py server HOST SECONDS    serves requests on HOST, port chosen by the
                                         kernel, for SECONDS; prints {"port", "certificate"}
  aioquic_perf.py client HOST PORT BYTES requests BYTES; prints {"received", "handshake_s",
                                         "transfer_s", "certificate"}

A request is one bidirectional stream: the response size as 8 bytes big-endian, then the
client finishes its side; the server answers with that many bytes and finishes. The server's
certificate is self-signed and made at start; "certificate" is its SHA-256 fingerprint as
openssl prints it (AB:CD:...), so the other end can pin it.
"""

import asyncio
import datetime
import json
import ssl
import sys
import tempfile
import time

from aioquic.asyncio import connect, serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def fingerprint(cert):
    return ":".join(f"{b:02X}" for b in cert.fingerprint(hashes.SHA256()))


def self_signed(directory):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aioquic-perf")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("netsweep")]), False)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = f"{directory}/cert.pem", f"{directory}/key.pem"
    with open(certfile, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(keyfile, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return certfile, keyfile, fingerprint(cert)


class PerfServer(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.heads = {}

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        head = self.heads.setdefault(event.stream_id, bytearray())
        if len(head) < 8:
            head += event.data[: 8 - len(head)]
        if event.end_stream:
            size = int.from_bytes(bytes(self.heads.pop(event.stream_id)), "big")
            self._quic.send_stream_data(event.stream_id, bytes(size), end_stream=True)
            self.transmit()


class PerfClient(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = 0
        self.done = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            self.received += len(event.data)
            if event.end_stream and not self.done.done():
                self.done.set_result(self.received)


async def server(host, seconds):
    with tempfile.TemporaryDirectory() as d:
        certfile, keyfile, fp = self_signed(d)
        config = QuicConfiguration(is_client=False, alpn_protocols=["perf"])
        config.load_cert_chain(certfile, keyfile)
        srv = await serve(host, 0, configuration=config, create_protocol=PerfServer)
        port = srv._transport.get_extra_info("sockname")[1]
        print(json.dumps({"port": port, "certificate": fp}), flush=True)
        await asyncio.sleep(seconds)
        srv.close()


async def client(host, port, size):
    config = QuicConfiguration(
        is_client=True,
        alpn_protocols=["perf"],
        verify_mode=ssl.CERT_NONE,
        server_name="netsweep",
    )
    start = time.perf_counter()
    async with connect(host, port, configuration=config, create_protocol=PerfClient) as c:
        shaken = time.perf_counter()
        stream = c._quic.get_next_available_stream_id()
        c._quic.send_stream_data(stream, size.to_bytes(8, "big"), end_stream=True)
        c.transmit()
        received = await asyncio.wait_for(c.done, 30)
        done = time.perf_counter()
        cert = c._quic.tls._peer_certificate
        print(
            json.dumps(
                {
                    "received": received,
                    "handshake_s": shaken - start,
                    "transfer_s": done - shaken,
                    "certificate": fingerprint(cert),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1] == "server":
        asyncio.run(server(sys.argv[2], float(sys.argv[3])))
    else:
        asyncio.run(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
