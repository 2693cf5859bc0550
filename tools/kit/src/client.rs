//! A blocking HTTP/1.1 connection over plain TCP or TLS: send bytes (a
//! request from [`crate::http::build_request`], or any bytes at all, for
//! hostile tests), read responses one after another. Bytes read past one
//! response are kept for the next, so pipelined and kept-alive exchanges
//! read as they happen on the wire.
//!
//! Not for: many connections at once (the load generator has its own event
//! loop), reconnecting (the caller decides when a connection is done), or
//! deciding what a response means.

use crate::http::{build_request, parse_response, Reading, Response};
use crate::tls::TlsStream;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One HTTP/1.1 connection.
pub struct Conn<S: Read + Write + SetTimeout> {
    pub stream: S,
    buf: Vec<u8>,
    /// Read with [`SetTimeout::read_no_write`] (after a failed write).
    read_only: bool,
    reading: Reading,
}

impl<S: Read + Write + SetTimeout> Conn<S> {
    /// A connection reading with [`Reading::ALL`].
    pub fn new(stream: S) -> Self {
        Conn::with_reading(stream, Reading::ALL)
    }

    /// A connection reading responses as `reading` says (its
    /// `head_request` is set per request by [`Conn::read_response_to`]).
    pub fn with_reading(stream: S, reading: Reading) -> Self {
        Conn {
            stream,
            buf: Vec::new(),
            read_only: false,
            reading,
        }
    }

    /// Sends `bytes` as far as the peer takes them; a write error (the peer
    /// answered early and closed) is returned but later reads still see
    /// what the peer sent.
    pub fn send_best_effort(&mut self, bytes: &[u8]) -> io::Result<()> {
        let r = self.send(bytes);
        if r.is_err() {
            self.read_only = true;
        }
        r
    }

    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Sends a request built by [`build_request`] with keep-alive and reads
    /// its response.
    pub fn exchange(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<Response> {
        self.send(&build_request(method, path, headers, body, true))?;
        self.read_response_to(method)
    }

    /// Like [`Conn::exchange`]; panics (with what went wrong) on an error.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        self.exchange(method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let read = if self.read_only {
                self.stream.read_no_write(&mut chunk)
            } else {
                self.stream.read(&mut chunk)
            };
            match read {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // rustls reports a close without close_notify this way.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the response to a GET (or any request but HEAD).
    pub fn read_response(&mut self) -> io::Result<Response> {
        self.read_response_to("GET")
    }

    /// Reads the response to a `method` request: to HEAD, a response has
    /// no body whatever its headers say.
    pub fn read_response_to(&mut self, method: &str) -> io::Result<Response> {
        let reading = Reading {
            head_request: method == "HEAD",
            ..self.reading
        };
        let mut eof = false;
        loop {
            match parse_response(&self.buf, &reading, eof) {
                Ok(Some((response, used))) => {
                    self.buf.drain(..used);
                    return Ok(response);
                }
                Ok(None) if eof => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "connection closed before a full response ({} bytes: {:?})",
                            self.buf.len(),
                            String::from_utf8_lossy(&self.buf)
                        ),
                    ))
                }
                Ok(None) => eof = self.fill()? == 0,
                Err(m) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{m}: {:?}", String::from_utf8_lossy(&self.buf)),
                    ))
                }
            }
        }
    }

    /// True when the peer has closed the connection (reads EOF within
    /// `timeout`); the read timeout is as before afterwards.
    pub fn is_closed_within(&mut self, timeout: Duration) -> bool {
        let restore = self.stream.timeout();
        self.stream.set_timeout(Some(timeout));
        // A read that times out means the connection is still open; only
        // an end of stream or a reset is a close.
        let closed = match self.fill() {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        };
        self.stream.set_timeout(restore);
        closed
    }
}

/// What [`Conn`] needs of a stream beyond Read + Write.
pub trait SetTimeout {
    /// The read timeout now.
    fn timeout(&self) -> Option<Duration>;
    fn set_timeout(&mut self, t: Option<Duration>);
    /// Reads without writing anything first. rustls' `StreamOwned::read`
    /// flushes pending ciphertext before reading, which fails after the
    /// peer stopped reading (EPIPE) even though its answer is waiting.
    fn read_no_write(&mut self, buf: &mut [u8]) -> io::Result<usize>;
}

impl SetTimeout for TcpStream {
    fn timeout(&self) -> Option<Duration> {
        self.read_timeout().ok().flatten()
    }
    fn set_timeout(&mut self, t: Option<Duration>) {
        let _ = self.set_read_timeout(t);
    }
    fn read_no_write(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read(buf)
    }
}

impl SetTimeout for TlsStream {
    fn timeout(&self) -> Option<Duration> {
        self.sock.read_timeout().ok().flatten()
    }
    fn set_timeout(&mut self, t: Option<Duration>) {
        let _ = self.sock.set_read_timeout(t);
    }
    fn read_no_write(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            let n = self.conn.read_tls(&mut self.sock)?;
            self.conn
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if n == 0 {
                return match self.conn.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    other => other,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn reads_kept_alive_answers_in_turn_and_one_that_runs_to_the_close() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut chunk = [0u8; 1024];
            while seen.windows(4).filter(|w| w == b"\r\n\r\n").count() < 2 {
                let n = s.read(&mut chunk).unwrap();
                seen.extend_from_slice(&chunk[..n]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
            s.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\nbye")
                .unwrap();
            seen
        });
        let tcp = crate::tls::tcp(addr, Duration::from_secs(10)).unwrap();
        let mut c = Conn::new(tcp);
        c.send(&build_request("GET", "/a", &[], b"", true)).unwrap();
        c.send(&build_request("GET", "/b", &[], b"", false))
            .unwrap();
        let first = c.read_response().unwrap();
        assert_eq!((first.status, first.text().as_str()), (200, "ok"));
        let second = c.read_response().unwrap();
        assert_eq!(
            (second.status, second.text().as_str(), second.close),
            (400, "bye", true)
        );
        let err = c.read_response().unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let seen = String::from_utf8(server.join().unwrap()).unwrap();
        assert!(
            seen.starts_with("GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n"),
            "{seen}"
        );
    }
}
