//! One keep-alive HTTPS connection driven by an event loop: a non-blocking
//! mio socket, rustls' client state machine over it, and an HTTP/1.1
//! response reader (httparse for the head, `Content-Length` framing).
//!
//! The connection carries one request at a time (no pipelining). It says
//! what went wrong by kind, so the report can count connect, TLS, I/O and
//! protocol failures apart.
//!
//! Not for: deciding what to send or when (see [`super::worker`]), chunked
//! responses (the service never sends them; one is a protocol error), or
//! bodies beyond [`BODY_BYTES_MAX`].

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

/// Response head bytes accepted.
pub const HEAD_BYTES_MAX: usize = 64 * 1024;
/// Response body bytes accepted.
pub const BODY_BYTES_MAX: usize = 1024 * 1024;
/// Header fields parsed in a response.
const HEADERS_COUNT_MAX: usize = 64;

/// A failure that is not an HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Failure {
    /// The TCP connection could not be made.
    Connect,
    /// No answer within the timeout.
    Timeout,
    /// TLS: handshake, certificate or record error.
    Tls,
    /// The connection broke or closed mid-request.
    Io,
    /// The answer was not HTTP/1.1 as we read it.
    Protocol,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Timeout => "timeout",
            Failure::Tls => "tls",
            Failure::Io => "io",
            Failure::Protocol => "protocol",
        }
    }
}

/// One HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// The server asked to close (or spoke HTTP/1.0).
    pub close: bool,
    /// The body, when the request asked for it to be kept.
    pub body: Vec<u8>,
    /// `Idempotent-Replayed: true`: a create answered with a key's stored
    /// 201.
    pub replayed: bool,
}

/// What an event brought.
#[derive(Debug)]
pub enum Progress {
    Nothing,
    Response(Response),
    /// The peer closed the connection (cleanly, between responses or not).
    Closed,
}

pub struct Conn {
    sock: TcpStream,
    tls: ClientConnection,
    connected: bool,
    inbuf: Vec<u8>,
    keep_body: bool,
}

impl Conn {
    /// Starts connecting; the socket is registered for both readiness
    /// kinds (edge-triggered), so no later re-registration is needed.
    pub fn open(
        addr: SocketAddr,
        config: &Arc<ClientConfig>,
        name: &ServerName<'static>,
        registry: &Registry,
        token: Token,
    ) -> Result<Conn, Failure> {
        let tls = ClientConnection::new(config.clone(), name.clone()).map_err(|_| Failure::Tls)?;
        let mut sock = TcpStream::connect(addr).map_err(|_| Failure::Connect)?;
        registry
            .register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)
            .map_err(|_| Failure::Connect)?;
        Ok(Conn {
            sock,
            tls,
            connected: false,
            inbuf: Vec::with_capacity(4096),
            keep_body: false,
        })
    }

    pub fn close(mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.sock);
    }

    /// Connected and the TLS handshake done.
    pub fn is_ready(&self) -> bool {
        self.connected && !self.tls.is_handshaking()
    }

    /// Queues a request (rustls holds it until the handshake is done) and
    /// writes what the socket takes (nothing before TCP is connected: the
    /// writable event that says so flushes it).
    pub fn send(&mut self, request: &[u8], keep_body: bool) -> Result<(), Failure> {
        self.keep_body = keep_body;
        self.tls
            .writer()
            .write_all(request)
            .map_err(|_| Failure::Tls)?;
        if self.connected {
            self.flush()
        } else {
            Ok(())
        }
    }

    /// Handles a readiness event; returns a complete response if one came.
    pub fn on_event(&mut self, readable: bool, writable: bool) -> Result<Progress, Failure> {
        if !self.connected && !self.check_connected()? {
            return Ok(Progress::Nothing);
        }
        let mut eof = false;
        if readable {
            eof = self.read()?;
        }
        if readable || writable {
            self.flush()?;
        }
        match parse_response(&self.inbuf, self.keep_body) {
            Err(Malformed) => Err(Failure::Protocol),
            Ok(Some((response, used))) => {
                self.inbuf.drain(..used);
                Ok(Progress::Response(response))
            }
            Ok(None) if eof => Ok(Progress::Closed),
            Ok(None) => Ok(Progress::Nothing),
        }
    }

    fn check_connected(&mut self) -> Result<bool, Failure> {
        match self.sock.take_error() {
            Ok(None) => {}
            _ => return Err(Failure::Connect),
        }
        match self.sock.peer_addr() {
            Ok(_) => {
                self.connected = true;
                let _ = self.sock.set_nodelay(true);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(_) => Err(Failure::Connect),
        }
    }

    /// Reads all the socket has (edge-triggered readiness), decrypting as
    /// it goes; true when the peer closed. A read that returns less than
    /// it asked for has emptied the socket (anything arriving later raises
    /// a new edge), so it ends the loop without one more read to see
    /// `WouldBlock`: one system call less per response.
    fn read(&mut self) -> Result<bool, Failure> {
        loop {
            let mut sock = ShortReads {
                sock: &mut self.sock,
                short: false,
            };
            match self.tls.read_tls(&mut sock) {
                Ok(0) => return Ok(true),
                Ok(_) => {
                    let drained = sock.short;
                    if self.tls.process_new_packets().is_err() {
                        // Send our alert if we can; the connection is done.
                        let _ = self.tls.write_tls(&mut self.sock);
                        return Err(Failure::Tls);
                    }
                    if self.drain_plaintext()? {
                        return Ok(true);
                    }
                    if drained {
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Failure::Io),
            }
        }
    }

    /// Moves decrypted bytes into the response buffer; true on close_notify.
    fn drain_plaintext(&mut self) -> Result<bool, Failure> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.tls.reader().read(&mut chunk) {
                Ok(0) => return Ok(true),
                Ok(n) => {
                    if self.inbuf.len() + n > HEAD_BYTES_MAX + BODY_BYTES_MAX {
                        return Err(Failure::Protocol);
                    }
                    self.inbuf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(true),
                Err(_) => return Err(Failure::Io),
            }
        }
    }

    fn flush(&mut self) -> Result<(), Failure> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if !self.connected => return Err(Failure::Connect),
                Err(_) => return Err(Failure::Io),
            }
        }
        Ok(())
    }
}

/// The socket as rustls reads it, noting whether the last read was short.
struct ShortReads<'a> {
    sock: &'a mut TcpStream,
    short: bool,
}

impl Read for ShortReads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

/// A response we cannot read: not HTTP/1.x, or not `Content-Length` framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Reads one response from the front of `buf`: `Ok(None)` until it is all
/// there, `Err(Malformed)` when it is not HTTP/1.x with `Content-Length`
/// framing. On success also returns the bytes it used.
pub fn parse_response(buf: &[u8], keep_body: bool) -> Result<Option<(Response, usize)>, Malformed> {
    if buf.is_empty() {
        return Ok(None);
    }
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_COUNT_MAX];
    let mut parsed = httparse::Response::new(&mut headers);
    let head_len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() <= HEAD_BYTES_MAX => return Ok(None),
        _ => return Err(Malformed),
    };
    let status = parsed.code.ok_or(Malformed)?;
    let mut length = None;
    let mut close = parsed.version == Some(0);
    let mut replayed = false;
    for h in parsed.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| Malformed)?;
            let n: usize = v.trim().parse().map_err(|_| Malformed)?;
            if length.is_some_and(|l| l != n) || n > BODY_BYTES_MAX {
                return Err(Malformed);
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Malformed);
        } else if h.name.eq_ignore_ascii_case("connection") {
            close |= h.value.eq_ignore_ascii_case(b"close");
        } else if h.name.eq_ignore_ascii_case("idempotent-replayed") {
            replayed = h.value.eq_ignore_ascii_case(b"true");
        }
    }
    let length = match length {
        Some(n) => n,
        None if status < 200 || status == 204 || status == 304 => 0,
        None => return Err(Malformed),
    };
    if status < 200 {
        // 1xx are not sent for these requests; skipping them is not needed.
        return Err(Malformed);
    }
    if buf.len() < head_len + length {
        return Ok(None);
    }
    let body = if keep_body {
        buf[head_len..head_len + length].to_vec()
    } else {
        Vec::new()
    };
    Ok(Some((
        Response {
            status,
            close,
            body,
            replayed,
        },
        head_len + length,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_partial_and_pipelined_responses() {
        let two = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let (r, used) = parse_response(two, true).unwrap().unwrap();
        assert_eq!(
            (r.status, r.close, r.body.as_slice()),
            (404, false, &b"{}"[..])
        );
        let (r, rest) = parse_response(&two[used..], false).unwrap().unwrap();
        assert_eq!((r.status, r.close, rest), (200, true, two.len() - used));
        for cut in 1..used {
            assert_eq!(parse_response(&two[..cut], true), Ok(None), "{cut}");
        }
    }

    #[test]
    fn framing_we_do_not_read_is_an_error() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert_eq!(
                parse_response(bad, true),
                Err(Malformed),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let http10 = b"HTTP/1.0 204 No Content\r\n\r\n";
        assert!(parse_response(http10, false).unwrap().unwrap().0.close);
    }
}
