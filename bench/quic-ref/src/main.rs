//! quic-ref: the QUIC performance protocol (ALPN `perf`: a request stream carries the
//! response size as 8 bytes, the server answers with that many) on quinn's own tokio driver,
//! with quinn's default transport settings — the reference bench/quic measures netsweep's
//! QUIC against.
//!
//!   quic-ref server ADDR           serve until killed; prints the bound address
//!   quic-ref client ADDR BYTES     download BYTES; prints {"bytes", "seconds"} as JSON

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

const ZEROS: [u8; 65536] = [0; 65536];

/// ring, as netsweep uses (deprecated by rustls for lacking post-quantum key exchange).
#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

async fn server(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let cert = rcgen::generate_simple_self_signed(vec!["netsweep".into()])?;
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key.into())?;
    tls.alpn_protocols = vec![b"perf".to_vec()];
    let config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    let endpoint = quinn::Endpoint::server(config, addr)?;
    println!("{}", endpoint.local_addr()?);
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                tokio::spawn(async move {
                    let mut head = [0u8; 8];
                    if recv.read_exact(&mut head).await.is_err() {
                        return;
                    }
                    let mut sink = vec![0u8; 65536];
                    while let Ok(Some(_)) = recv.read(&mut sink).await {}
                    let mut left = u64::from_be_bytes(head);
                    while left > 0 {
                        let n = left.min(ZEROS.len() as u64) as usize;
                        if send.write_all(&ZEROS[..n]).await.is_err() {
                            return;
                        }
                        left -= n as u64;
                    }
                    let _ = send.finish();
                    let _ = send.stopped().await;
                });
            }
        });
    }
    Ok(())
}

/// Accepts any certificate: the bench's own server, on loopback.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

async fn client(addr: SocketAddr, bytes: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider())))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"perf".to_vec()];
    let config = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse()?)?;
    endpoint.set_default_client_config(config);
    let conn = endpoint.connect(addr, "netsweep")?.await?;
    let start = Instant::now();
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(&bytes.to_be_bytes()).await?;
    send.finish()?;
    let mut got = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    while let Some(n) = recv.read(&mut buf).await? {
        got += n as u64;
    }
    let seconds = start.elapsed().as_secs_f64();
    conn.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    println!("{{\"bytes\": {got}, \"seconds\": {seconds}}}");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("server"), Some(a)) => server(a.parse()?).await,
        (Some("client"), Some(a)) => {
            let bytes = args.get(3).ok_or("client ADDR BYTES")?.parse()?;
            client(a.parse()?, bytes).await
        }
        _ => Err("usage: quic-ref server ADDR | client ADDR BYTES".into()),
    }
}
