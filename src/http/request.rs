//! A parsed HTTP request as handlers see it.

/// One request, fully read (body included) and bounded by [`super::Limits`].
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path without the query string, as sent (percent-encoding kept).
    pub path: String,
    /// The query string without `?`, if any.
    pub query: Option<String>,
    /// Header names lowercased; values as bytes-to-string (lossy for non-UTF-8).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub peer: std::net::SocketAddr,
}

impl Request {
    /// The first header with this (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of cookie `name` in the `Cookie` header(s), trimmed; the
    /// first one wins.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == "cookie")
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.trim())
    }

    /// Every value of a header (for ones that must not be repeated).
    pub fn header_count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }
}
