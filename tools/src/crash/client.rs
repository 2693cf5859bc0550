//! A blocking HTTPS/1.1 client for the crash harness: one keep-alive TLS
//! connection to the service, reopened after any error (the service is
//! killed under it on purpose), with a short timeout on every read.
//!
//! Not for: load measurement (`crate::load` has the event-loop client).

use crate::load::target::{client_config, Trust};
use anyhow::Result;
use rustls::pki_types::ServerName;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A request's whole answer must come within this.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// An answer larger than this is not the service's.
const RESPONSE_BYTES_MAX: usize = 256 * 1024;

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

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
    conn: Option<Tls>,
}

impl Client {
    /// A client of the service at `addr` trusting the certificate at `cert`.
    pub fn new(addr: SocketAddr, cert: &Path, token: &str) -> Result<Client> {
        Ok(Client {
            addr,
            tls: client_config(Trust::CaFile(cert))?,
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
        let extra = format!("Idempotency-Key: {key}\r\n");
        let result = self.try_request("POST", "/api/v1/verifications/", Some(&bytes), &extra);
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    /// One request on the kept connection (opened if needed); any error
    /// drops the connection so the next request starts afresh.
    pub fn request(&mut self, method: &str, path: &str, body: Option<&[u8]>) -> io::Result<Reply> {
        let result = self.try_request(method, path, body, "");
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
        extra_headers: &str,
    ) -> io::Result<Reply> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
             {extra_headers}",
            self.token
        );
        if let Some(b) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        let conn = self.connection()?;
        conn.write_all(&bytes)?;
        conn.flush()?;
        read_reply(conn)
    }

    fn connection(&mut self) -> io::Result<&mut Tls> {
        if self.conn.is_none() {
            let tcp = TcpStream::connect_timeout(&self.addr, IO_TIMEOUT)?;
            tcp.set_read_timeout(Some(IO_TIMEOUT))?;
            tcp.set_write_timeout(Some(IO_TIMEOUT))?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
            let conn =
                rustls::ClientConnection::new(self.tls.clone(), name).map_err(io::Error::other)?;
            self.conn = Some(rustls::StreamOwned::new(conn, tcp));
        }
        // Set just above.
        self.conn
            .as_mut()
            .ok_or_else(|| io::Error::other("no connection"))
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Reads one response with a `Content-Length` body.
fn read_reply(conn: &mut Tls) -> io::Result<Reply> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 8192];
    let head_len = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > RESPONSE_BYTES_MAX {
            return Err(bad("response head too large"));
        }
        match conn.read(&mut chunk)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut parsed = httparse::Response::new(&mut headers);
    if !matches!(
        parsed.parse(&buf[..head_len]),
        Ok(httparse::Status::Complete(_))
    ) {
        return Err(bad("malformed response head"));
    }
    let status = parsed.code.ok_or_else(|| bad("no status"))?;
    let length = parsed
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| {
            std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        })
        .ok_or_else(|| bad("no Content-Length"))?;
    if length > RESPONSE_BYTES_MAX {
        return Err(bad("response body too large"));
    }
    let replayed = parsed.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("idempotent-replayed") && h.value.eq_ignore_ascii_case(b"true")
    });
    let mut body = buf.split_off(head_len);
    while body.len() < length {
        match conn.read(&mut chunk)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(length);
    Ok(Reply {
        status,
        body,
        replayed,
    })
}
