//! An HTTP response and its serialisation, and the `{detail}` error body
//! that this layer's own refusals (400, 408, 413, 431, ...) and the API's
//! share.
//!
//! Not for: the API's other bodies (`crate::openapi`, which describes this
//! one too).

use serde::Serialize;
use std::io::Write;
use utoipa::ToSchema;

/// `{detail}`: the body of 401, 403, 404, 405, 429, 500 and of a 400 for
/// malformed JSON.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A human-readable explanation.
    pub detail: String,
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A JSON response (`Content-Type: application/json`, as the spec wants
    /// on every answer).
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            headers: vec![("Content-Type", "application/json".to_owned())],
            body: body.into(),
        }
    }

    /// `{"detail": "<text>"}`, the legacy error body.
    pub fn detail(status: u16, text: &str) -> Self {
        let body = ErrorDetail {
            detail: text.to_owned(),
        };
        Response::json(status, serde_json::to_string(&body).unwrap_or_default())
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Writes the response; for a HEAD request (`head_only`) the headers
    /// alone, with the Content-Length the body would have had (RFC 9110
    /// 9.3.2), so a kept-alive connection stays in step.
    pub(crate) fn write_to(
        &self,
        out: &mut impl Write,
        close: bool,
        head_only: bool,
    ) -> std::io::Result<()> {
        let mut head = Vec::with_capacity(256 + self.body.len());
        write!(
            head,
            "HTTP/1.1 {} {}\r\n",
            self.status,
            reason_phrase(self.status)
        )?;
        for (name, value) in &self.headers {
            // Values are produced by this service; strip CR/LF anyway so a
            // bug elsewhere can never split the response.
            let clean: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
            write!(head, "{name}: {clean}\r\n")?;
        }
        write!(head, "Content-Length: {}\r\n", self.body.len())?;
        if close {
            head.extend_from_slice(b"Connection: close\r\n");
        }
        head.extend_from_slice(b"\r\n");
        if !head_only {
            head.extend_from_slice(&self.body);
        }
        out.write_all(&head)?;
        out.flush()
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        301 => "Moved Permanently",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}
