//! Requests to the server under test, byte for byte: TLS connections that
//! trust only the server's own certificate (SNI `localhost`), plain TCP to
//! its redirect listener, one-shot requests, and the API's three
//! operations (create, read, cancel) with a key.
//!
//! The client is the kit's ([`Conn`], [`build_request`]); a response is a
//! [`Resp`], read as JSON with [`Json`].
//!
//! Not for: the operator CLI (see [`super::operator`]), or the dashboard's
//! forms (see [`super::dashboard`]).

use super::{Server, COLLECTION};
pub use dialproof_kit::client::{Conn, SetTimeout};
pub use dialproof_kit::http::build_request;
use dialproof_kit::tls;
pub use dialproof_kit::tls::TlsStream;
use dialproof_kit::webhook::Hit;
use serde_json::Value;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A response as the tests read it.
pub type Resp = dialproof_kit::http::Response;

/// Socket read/write timeout of the test clients.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A body the test expects to be JSON: reading it otherwise fails the test
/// with what it was.
pub trait Json {
    /// The status (or `0`) and the body, for the failure message.
    fn described(&self) -> (u16, &[u8]);

    fn json(&self) -> Value {
        let (status, body) = self.described();
        serde_json::from_slice(body).unwrap_or_else(|e| {
            panic!(
                "status {status} body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(body)
            )
        })
    }

    /// `body["detail"]` as a string.
    fn detail(&self) -> String {
        let v = self.json();
        v["detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no detail in {v}"))
            .to_owned()
    }
}

impl Json for Resp {
    fn described(&self) -> (u16, &[u8]) {
        (self.status, &self.body)
    }
}

impl Json for Hit {
    fn described(&self) -> (u16, &[u8]) {
        (0, &self.body)
    }
}

impl Server {
    /// A fresh TLS connection to the API listener (SNI `localhost`, the
    /// server's self-signed certificate as the only root).
    pub fn connect(&self) -> Conn<TlsStream> {
        self.connect_with(&self.tls)
    }

    /// Like [`Server::connect`], offering these ALPN protocols.
    pub fn connect_alpn(&self, protocols: &[&[u8]]) -> Conn<TlsStream> {
        let mut config = (*self.tls).clone();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        self.connect_with(&Arc::new(config))
    }

    fn connect_with(&self, config: &Arc<rustls::ClientConfig>) -> Conn<TlsStream> {
        let stream = tls::connect(self.https, config, "localhost", IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("connecting to the https listener {}: {e}", self.https));
        Conn::new(stream)
    }

    /// A fresh plain TCP connection to the redirect listener.
    pub fn connect_plain(&self) -> Conn<TcpStream> {
        let addr = self.http.expect("no http listener");
        let tcp = tls::tcp(addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("connecting to the http listener {addr}: {e}"));
        Conn::new(tcp)
    }

    /// Sends exactly `bytes` on a new plain connection; reads one response.
    pub fn raw_plain(&self, bytes: &[u8]) -> Resp {
        let mut c = self.connect_plain();
        c.send(bytes).expect("sending request");
        c.read_response().expect("reading response")
    }

    /// One request on its own connection (`Connection: close`). `Host` and
    /// `Content-Length` are added unless `headers` has them.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        let mut c = self.connect();
        c.send(&build_request(method, path, headers, body, false))
            .expect("sending request");
        c.read_response_to(method).expect("reading response")
    }

    pub fn create(&self, token: &str, body: &Value) -> Resp {
        self.create_raw(token, body.to_string().as_bytes())
    }

    pub fn create_raw(&self, token: &str, body: &[u8]) -> Resp {
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            COLLECTION,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json; charset=utf-8"),
            ],
            body,
        )
    }

    /// A create with `Idempotency-Key: key` and `body` as given.
    pub fn create_keyed(&self, token: &str, key: &str, body: &[u8]) -> Resp {
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            COLLECTION,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
                ("Idempotency-Key", key),
            ],
            body,
        )
    }

    /// Creates and asserts 201; returns the Verification.
    pub fn create_ok(&self, token: &str, body: &Value) -> Value {
        let r = self.create(token, body);
        assert_eq!(r.status, 201, "create {body} -> {}", r.text());
        r.json()
    }

    pub fn get(&self, token: &str, id: &str) -> Resp {
        let auth = format!("Bearer {token}");
        self.request(
            "GET",
            &format!("{COLLECTION}{id}/"),
            &[("Authorization", &auth)],
            b"",
        )
    }

    pub fn cancel(&self, token: &str, id: &str) -> Resp {
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            &format!("{COLLECTION}{id}/cancel/"),
            &[("Authorization", &auth)],
            b"",
        )
    }
}

/// One GET over plain HTTP to `addr` (the operators' listener, or a
/// service started outside [`Server`]) on its own connection.
pub fn plain_get(addr: SocketAddr, path: &str) -> Resp {
    let tcp = tls::tcp(addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connecting to the plain listener {addr}: {e}"));
    let mut c = Conn::new(tcp);
    c.send(&build_request("GET", path, &[], b"", false))
        .expect("sending request");
    c.read_response().expect("reading response")
}
