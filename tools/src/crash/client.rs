//! A blocking HTTPS/1.1 client for the crash harness: one keep-alive TLS
//! connection to the service, reopened after any error (the service is
//! killed under it on purpose), with a short timeout on every read.
//!
//! Not for: load measurement (`crate::load` has the event-loop client).

use anyhow::Result;
use dialproof_kit::client::Conn;
use dialproof_kit::http::{build_request, Reading};
use dialproof_kit::tls::{self, TlsStream, Trust};
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A request's whole answer must come within this.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// An answer larger than this is not the service's.
const RESPONSE_BYTES_MAX: usize = 256 * 1024;
/// What the harness reads: the service's answers, always framed by
/// `Content-Length`.
const READING: Reading = Reading {
    head_request: false,
    keep_headers: false,
    keep_body: true,
    body_until_close: false,
    head_bytes_max: RESPONSE_BYTES_MAX,
    body_bytes_max: RESPONSE_BYTES_MAX,
};

/// One answer: status, body, and whether it replayed a key's create.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    /// `Idempotent-Replayed: true`.
    pub replayed: bool,
}

impl Reply {
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

pub struct Client {
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    token: String,
    conn: Option<Conn<TlsStream>>,
}

impl Client {
    /// A client of the service at `addr` trusting the certificate at `cert`.
    pub fn new(addr: SocketAddr, cert: &Path, token: &str) -> Result<Client> {
        Ok(Client {
            addr,
            tls: tls::client_config(Trust::CaFile(cert))?,
            token: token.to_owned(),
            conn: None,
        })
    }

    /// `GET /api/v1/verifications/{id}/`.
    pub fn read(&mut self, id: &str) -> io::Result<Reply> {
        self.request("GET", &format!("/api/v1/verifications/{id}/"), None)
    }

    /// `POST /api/v1/verifications/{id}/cancel/`.
    pub fn cancel(&mut self, id: &str) -> io::Result<Reply> {
        self.request(
            "POST",
            &format!("/api/v1/verifications/{id}/cancel/"),
            Some(b""),
        )
    }

    /// `POST /api/v1/verifications/` with a JSON body.
    pub fn create(&mut self, body: &serde_json::Value) -> io::Result<Reply> {
        let bytes = body.to_string().into_bytes();
        self.request("POST", "/api/v1/verifications/", Some(&bytes))
    }

    /// A create with `Idempotency-Key: key`.
    pub fn create_keyed(&mut self, body: &serde_json::Value, key: &str) -> io::Result<Reply> {
        let bytes = body.to_string().into_bytes();
        let result = self.try_request("POST", "/api/v1/verifications/", Some(&bytes), Some(key));
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    /// One request on the kept connection (opened if needed); any error
    /// drops the connection so the next request starts afresh.
    pub fn request(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> io::Result<Reply> {
        let result = self.try_request(method, path, body, None);
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    fn try_request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        idempotency_key: Option<&str>,
    ) -> io::Result<Reply> {
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![("Authorization", auth.as_str())];
        if let Some(key) = idempotency_key {
            headers.push(("Idempotency-Key", key));
        }
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        let bytes = build_request(method, path, &headers, body.unwrap_or_default(), true);
        let conn = self.connection()?;
        conn.send(&bytes)?;
        let response = conn.read_response_to(method)?;
        Ok(Reply {
            status: response.status,
            body: response.body,
            replayed: response.replayed,
        })
    }

    fn connection(&mut self) -> io::Result<&mut Conn<TlsStream>> {
        if self.conn.is_none() {
            let stream = tls::connect(self.addr, &self.tls, "localhost", IO_TIMEOUT)?;
            self.conn = Some(Conn::with_reading(stream, READING));
        }
        // Set just above.
        self.conn
            .as_mut()
            .ok_or_else(|| io::Error::other("no connection"))
    }
}
