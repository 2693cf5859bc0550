//! A parsed HTTP request as handlers see it.

use dialproof_engine::http_head::Head;

/// One request, fully read (body included) and bounded by [`super::Limits`].
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and header fields (names lowercased; values
    /// trimmed, lossy for non-UTF-8), in one owned text.
    head: Head,
    pub body: Vec<u8>,
    pub peer: std::net::SocketAddr,
}

impl Request {
    pub fn new(head: Head, body: Vec<u8>, peer: std::net::SocketAddr) -> Request {
        Request { head, body, peer }
    }

    /// A request without a body, built from its parts by the parser the
    /// connection uses, under the default limits (for unit tests of
    /// handlers).
    #[cfg(test)]
    pub fn parsed(method: &str, target: &str, headers: &[(&str, &str)]) -> Request {
        let mut raw = format!("{method} {target} HTTP/1.1\r\n");
        for (name, value) in headers {
            raw.push_str(&format!("{name}: {value}\r\n"));
        }
        raw.push_str("\r\n");
        let limits = super::Limits::default().head();
        let head = dialproof_engine::http_head::parse_head(raw.as_bytes(), &limits)
            .expect("a well-formed test head");
        Request::new(head, Vec::new(), "127.0.0.1:1".parse().expect("an address"))
    }

    pub fn method(&self) -> &str {
        self.head.method()
    }

    /// The path without the query string, as sent (percent-encoding kept).
    pub fn path(&self) -> &str {
        self.head.path()
    }

    /// The query string without `?`, if any.
    pub fn query(&self) -> Option<&str> {
        self.head.query()
    }

    /// The first header with this (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.values(name).next()
    }

    /// Every value of header `name` (lowercase), in the order sent.
    pub fn header_values<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.head.values(name)
    }

    /// The value of cookie `name` in the `Cookie` header(s), trimmed; the
    /// first one wins.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.head
            .values("cookie")
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.trim())
    }

    /// Every value of a header (for ones that must not be repeated).
    pub fn header_count(&self, name: &str) -> usize {
        self.head.values(name).count()
    }
}
