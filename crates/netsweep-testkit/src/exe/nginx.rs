//! nginx (Debian's nginx-light) as the tests start it: a self-signed certificate made with
//! openssl, and an nginx running one `http { … }` body from a scratch directory (its pid,
//! logs and temporary files there, no master process), killed when dropped.

use super::iperf3::Killed;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A P-256 certificate for 127.0.0.1 and its key, made in `dir` as `NAME.crt`/`NAME.key`.
pub fn self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (crt, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    let o = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (crt, key)
}

/// nginx serving `http_body` (the inside of `http { … }`) from `dir`, once it accepts
/// connections on `listen` (20 s at most).
pub fn start(dir: &Path, http_body: &str, listen: &str) -> Killed {
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nuser root;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         {http_body}}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let nginx = Command::new("nginx")
        .args(["-e", &format!("{d}/error.log"), "-p", &d.to_string(), "-c"])
        .arg(dir.join("nginx.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let nginx = Killed(nginx);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(listen).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not listen on {listen}: {}",
            std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    nginx
}

/// openssl's SHA-256 fingerprint of the certificate at `crt` (`AB:CD:…`).
pub fn fingerprint(crt: &Path) -> String {
    let o = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(crt)
        .output()
        .unwrap();
    let fp = String::from_utf8(o.stdout).unwrap();
    let fp = fp.trim().rsplit('=').next().unwrap().to_string();
    assert_eq!(fp.len(), 95, "openssl x509 -fingerprint: {fp:?}");
    fp
}
