//! The responses we build: status line and reason phrase, the request's
//! Via, From, To (with our tag), Call-ID and CSeq, and the tag helpers.
//!
//! Not for: deciding which response to send (`super::server`, the call
//! path) or parsing (`super::message`).

use super::message::Message;
use super::via::{params_of, push_decimal};

/// The reason phrase we write for a status code.
pub fn reason_phrase(code: u16) -> &'static str {
    match code {
        100 => "Trying",
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        480 => "Temporarily Unavailable",
        481 => "Call/Transaction Does Not Exist",
        486 => "Busy Here",
        487 => "Request Terminated",
        500 => "Server Internal Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        603 => "Decline",
        _ => "Unknown",
    }
}

/// The `User-Agent`/`Server` value we send.
pub const PRODUCT: &str = "dialproof";

/// A response to `req`: its Via headers (already stamped by the caller if
/// needed, see [`super::via::Via::stamped`]), From, To (with `to_tag` added when the
/// request's To has none and the response is not a 100), Call-ID and CSeq.
/// `extra` headers are written as given.
pub fn build_response(
    req: &Message,
    vias: &[String],
    code: u16,
    to_tag: Option<&str>,
    extra: &[(&str, &str)],
) -> Vec<u8> {
    // Plain pushes, not `write!`: a response is built for every call, and
    // the formatting machinery was most of its cost.
    let mut out = String::with_capacity(512);
    out.push_str("SIP/2.0 ");
    push_decimal(&mut out, code);
    out.push(' ');
    out.push_str(reason_phrase(code));
    out.push_str("\r\n");
    for v in vias {
        push_header(&mut out, "Via", v);
    }
    push_header(&mut out, "From", req.header("From").unwrap_or(""));
    let to = req.header("To").unwrap_or("");
    out.push_str("To: ");
    out.push_str(to);
    if let Some(tag) = to_tag.filter(|_| code > 100 && !has_tag(to)) {
        out.push_str(";tag=");
        out.push_str(tag);
    }
    out.push_str("\r\n");
    push_header(&mut out, "Call-ID", req.call_id());
    out.push_str("CSeq: ");
    push_decimal(&mut out, req.cseq.0);
    out.push(' ');
    out.push_str(req.cseq.1.as_str());
    out.push_str("\r\n");
    for (k, v) in extra {
        push_header(&mut out, k, v);
    }
    out.push_str("Server: ");
    out.push_str(PRODUCT);
    out.push_str("\r\nContent-Length: 0\r\n\r\n");
    out.into_bytes()
}

/// `name: value` and its line end.
fn push_header(out: &mut String, name: &str, value: &str) {
    out.push_str(name);
    out.push_str(": ");
    out.push_str(value);
    out.push_str("\r\n");
}

/// Whether a From/To value carries a `tag` parameter (outside its URI).
pub fn has_tag(value: &str) -> bool {
    tag_param(value).is_some()
}

/// The `tag` parameter of a From/To value.
pub fn tag_of(value: &str) -> Option<String> {
    tag_param(value).map(str::to_owned)
}

/// The `tag` parameter of a From/To value, borrowed: after the `>` of a
/// name-addr, or after the first `;` of a bare URI.
fn tag_param(value: &str) -> Option<&str> {
    let params = match value.rfind('>') {
        Some(i) => &value[i + 1..],
        None => value.split_once(';').map_or("", |(_, p)| p),
    };
    params_of(params.trim_start_matches(';'))
        .find(|(k, _)| k.eq_ignore_ascii_case("tag"))
        .and_then(|(_, v)| v)
}
