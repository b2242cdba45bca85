//! The responsiveness configuration document (the draft's §6, Apple's `urls` JSON): where a
//! server's large download, small download and upload endpoints are. `serve --rpm` writes one
//! for the name a client asked it by; `netsweep rpm` reads one, within a size budget, and
//! refuses URLs it cannot use by name.

use http::Uri;
use serde::{Deserialize, Serialize};

/// The path a server's document is at (`/.well-known/nq`, as Apple's and Cloudflare's).
pub const WELL_KNOWN: &str = "/.well-known/nq";
/// The paths `serve --rpm` answers on.
pub const LARGE: &str = "/large";
/// See [`LARGE`].
pub const SMALL: &str = "/small";
/// See [`LARGE`].
pub const UPLOAD: &str = "/slurp";
/// The largest configuration document read (a real one is a few hundred bytes).
pub const MAX_DOCUMENT: usize = 64 << 10;

/// The document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// The format's version: 1.
    pub version: u32,
    /// The three endpoints.
    pub urls: Urls,
    /// A host the test should be run against instead of the document's own (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_endpoint: Option<String>,
}

/// The endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Urls {
    /// A few bytes: what every probe fetches.
    pub small_https_download_url: String,
    /// An object larger than any test moves: what download load fetches.
    pub large_https_download_url: String,
    /// Takes a body of any size: what upload load posts.
    pub https_upload_url: String,
}

impl Document {
    /// The document of a server reached as `authority` (`host:port`) over HTTPS.
    pub fn for_authority(authority: &str) -> Self {
        let url = |p: &str| format!("https://{authority}{p}");
        Self {
            version: 1,
            urls: Urls {
                small_https_download_url: url(SMALL),
                large_https_download_url: url(LARGE),
                https_upload_url: url(UPLOAD),
            },
            test_endpoint: None,
        }
    }

    /// Reads a document, or says what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_DOCUMENT {
            return Err(format!(
                "the configuration document is {} bytes, more than the {MAX_DOCUMENT} read",
                bytes.len()
            ));
        }
        let d: Document = serde_json::from_slice(bytes).map_err(|e| {
            format!("the configuration document is not the draft's JSON ({{\"version\": 1, \"urls\": {{\"small_https_download_url\", \"large_https_download_url\", \"https_upload_url\"}}}}): {e}")
        })?;
        for u in [
            &d.urls.small_https_download_url,
            &d.urls.large_https_download_url,
            &d.urls.https_upload_url,
        ] {
            Endpoint::parse(u)?;
        }
        Ok(d)
    }
}

/// An HTTPS URL, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The host as written (a name, an IPv4 address or a bracketed IPv6 one, unbracketed here).
    pub host: String,
    /// The port (443 unless written).
    pub port: u16,
    /// The path and query.
    pub path: String,
    /// The URL as written.
    pub url: String,
}

impl Endpoint {
    /// An `https://` URL; anything else is refused by name.
    pub fn parse(s: &str) -> Result<Self, String> {
        let u: Uri = s.parse().map_err(|e| format!("{s:?} is not a URL: {e}"))?;
        match u.scheme_str() {
            Some("https") => {}
            Some(other) => {
                return Err(format!(
                    "{s}: the responsiveness test runs over HTTP/2 with TLS, so it needs an \
                     https:// URL, not {other}://"
                ))
            }
            None => return Err(format!("{s}: give a full https:// URL")),
        }
        let host = u
            .host()
            .ok_or_else(|| format!("{s}: the URL has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        Ok(Self {
            host,
            port: u.port_u16().unwrap_or(443),
            path: u
                .path_and_query()
                .map_or("/".to_string(), |p| p.as_str().to_string()),
            url: s.to_string(),
        })
    }

    /// `host:port`, an IPv6 host bracketed.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Where `netsweep rpm TARGET` finds the document: TARGET itself when it is an https:// URL,
/// else `https://TARGET/.well-known/nq` with [`DEFAULT_PORT`] unless TARGET has a port.
pub fn document_url(target: &str) -> Result<Endpoint, String> {
    if target.contains("://") {
        return Endpoint::parse(target);
    }
    let has_port = if target.starts_with('[') {
        target.contains("]:")
    } else {
        target.matches(':').count() == 1
    };
    let authority = if has_port {
        target.to_string()
    } else if target.contains(':') {
        format!("[{target}]:{DEFAULT_PORT}")
    } else {
        format!("{target}:{DEFAULT_PORT}")
    };
    Endpoint::parse(&format!("https://{authority}{WELL_KNOWN}"))
}

/// The port `serve --rpm` listens on unless told, and `netsweep rpm HOST` asks.
pub const DEFAULT_PORT: u16 = 4043;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_document_reads_back() {
        let d = Document::for_authority("[2001:db8::1]:4043");
        let text = serde_json::to_vec(&d).unwrap();
        assert_eq!(Document::parse(&text).unwrap(), d);
        let e = Endpoint::parse(&d.urls.large_https_download_url).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("2001:db8::1", 4043, "/large")
        );
        assert_eq!(e.authority(), "[2001:db8::1]:4043");
    }

    #[test]
    fn targets_become_document_urls() {
        let u = |t: &str| document_url(t).unwrap().url;
        assert_eq!(u("198.18.0.1"), "https://198.18.0.1:4043/.well-known/nq");
        assert_eq!(u("host:8443"), "https://host:8443/.well-known/nq");
        assert_eq!(u("::1"), "https://[::1]:4043/.well-known/nq");
        assert_eq!(u("[::1]:9"), "https://[::1]:9/.well-known/nq");
        assert_eq!(u("https://h/cfg"), "https://h/cfg");
    }

    #[test]
    fn unusable_documents_and_urls_are_refused_by_name() {
        assert!(Endpoint::parse("http://h/x")
            .unwrap_err()
            .contains("https://"));
        assert!(Document::parse(b"{}").unwrap_err().contains("version"));
        assert!(Document::parse(&vec![b' '; MAX_DOCUMENT + 1])
            .unwrap_err()
            .contains("more than"));
        let bad = br#"{"version":1,"urls":{"small_https_download_url":"ftp://x/",
            "large_https_download_url":"https://x/l","https_upload_url":"https://x/u"}}"#;
        assert!(Document::parse(bad).unwrap_err().contains("ftp://"));
    }
}
