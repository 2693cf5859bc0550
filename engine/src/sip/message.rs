//! The SIP parsing edge: one UDP datagram in, a [`Message`] with canonical
//! header names out, or a [`ParseError`]; and the few messages we build.
//!
//! What it normalises, so nothing behind it has to: compact header names
//! (`v:`, `f:`, `i:`... RFC 3261 s7.3.3 says they MUST be accepted) become
//! their long names; folded lines (a line starting with a space or tab
//! continues the previous header, s7.3.1) are joined; several Via values on
//! one line (`Via: a, b`) become separate headers in order; header names
//! are matched case-insensitively. Unknown headers are kept as they are.
//!
//! What it refuses: anything over [`DATAGRAM_BYTES_MAX`] or with more than
//! [`HEADERS_COUNT_MAX`] headers, a start line that is not SIP/2.0, a
//! request without Via, From, To, Call-ID or CSeq, a CSeq whose method is
//! not the request's, a Content-Length larger than the body that came.
//! Every step works on checked slices; peer bytes never reach an `unwrap`.
//!
//! Via values are `super::via`'s (re-exported here), the responses we
//! build `super::response`'s.
//!
//! Not for: the meaning of From/To/PAI values (see [`super::uri`] and
//! [`super::identity`]) or transaction state (see [`super::server`]).

pub use super::via::{params_of, parse_params, split_host_port, Via, BRANCH_COOKIE};
use std::borrow::Cow;
use std::fmt;

/// The largest datagram we parse. RFC 3261 s18.1.1 sends anything near the
/// path MTU over TCP, so real INVITEs over UDP stay under ~1.3 KB; 16 KiB
/// leaves room for long PAI chains and bodies while bounding the work.
pub const DATAGRAM_BYTES_MAX: usize = 16 * 1024;
/// Most header fields in one message, counted after splitting Via values.
/// A real INVITE has 10 to 30; a proxy chain adds a Via per hop (70 at the
/// very most, Max-Forwards' default).
pub const HEADERS_COUNT_MAX: usize = 128;
/// Most Via values one message may carry.
pub const VIA_COUNT_MAX: usize = 70;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// More than [`DATAGRAM_BYTES_MAX`] bytes.
    TooLarge,
    /// No blank line ends the headers.
    NoHeaderEnd,
    /// The header section is not UTF-8.
    NotUtf8,
    BadStartLine,
    /// A header line without a colon or with an empty or invalid name.
    BadHeader,
    /// More than [`HEADERS_COUNT_MAX`] headers or [`VIA_COUNT_MAX`] Vias.
    TooManyHeaders,
    /// A header every request or response must have.
    Missing(&'static str),
    BadCSeq,
    BadContentLength,
    /// Content-Length says more bytes than the datagram holds.
    Truncated,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::TooLarge => write!(f, "datagram over {DATAGRAM_BYTES_MAX} bytes"),
            ParseError::NoHeaderEnd => f.write_str("no blank line after the headers"),
            ParseError::NotUtf8 => f.write_str("headers are not UTF-8"),
            ParseError::BadStartLine => f.write_str("malformed start line"),
            ParseError::BadHeader => f.write_str("malformed header line"),
            ParseError::TooManyHeaders => f.write_str("too many headers"),
            ParseError::Missing(name) => write!(f, "missing {name} header"),
            ParseError::BadCSeq => f.write_str("malformed CSeq"),
            ParseError::BadContentLength => f.write_str("malformed Content-Length"),
            ParseError::Truncated => f.write_str("body shorter than Content-Length"),
        }
    }
}

impl std::error::Error for ParseError {}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Invite,
    Ack,
    Cancel,
    Bye,
    Options,
    Register,
    Other(String),
}

impl Method {
    pub fn parse(token: &str) -> Option<Method> {
        if token.is_empty() || !token.bytes().all(is_token_byte) {
            return None;
        }
        // Methods are case-sensitive (RFC 3261 s7.1).
        Some(match token {
            "INVITE" => Method::Invite,
            "ACK" => Method::Ack,
            "CANCEL" => Method::Cancel,
            "BYE" => Method::Bye,
            "OPTIONS" => Method::Options,
            "REGISTER" => Method::Register,
            other => Method::Other(other.to_owned()),
        })
    }

    pub fn as_str(&self) -> &str {
        match self {
            Method::Invite => "INVITE",
            Method::Ack => "ACK",
            Method::Cancel => "CANCEL",
            Method::Bye => "BYE",
            Method::Options => "OPTIONS",
            Method::Register => "REGISTER",
            Method::Other(s) => s,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartLine {
    Request { method: Method, uri: String },
    Response { code: u16, reason: String },
}

/// One header field: its canonical name, and where its unfolded, trimmed
/// value lies in the message's one text of values. A name SIP defines is
/// borrowed from the parser's table and every value shares one buffer, so
/// a datagram's headers cost two allocations, not one per header.
#[derive(Clone, Debug)]
struct Field {
    name: Cow<'static, str>,
    start: u32,
    end: u32,
}

/// A parsed message. Header order is kept (Via order matters).
#[derive(Clone, Debug)]
pub struct Message {
    pub start: StartLine,
    fields: Vec<Field>,
    /// Every header value, one after the other, as [`Field`]s point.
    values: String,
    pub body: Vec<u8>,
    /// CSeq number and method, checked at parse time.
    pub cseq: (u32, Method),
}

/// Two messages are equal when their start lines, header fields (names and
/// values, in order), CSeq and body are; where the values lie does not
/// matter.
impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        self.start == other.start
            && self.cseq == other.cseq
            && self.body == other.body
            && self.fields().eq(other.fields())
    }
}

impl Eq for Message {}

/// Compact forms (RFC 3261 s7.3.3, RFC 3515, RFC 3265, RFC 4028...).
const COMPACT: &[(u8, &str)] = &[
    (b'a', "Accept-Contact"),
    (b'b', "Referred-By"),
    (b'c', "Content-Type"),
    (b'd', "Request-Disposition"),
    (b'e', "Content-Encoding"),
    (b'f', "From"),
    (b'i', "Call-ID"),
    (b'j', "Reject-Contact"),
    (b'k', "Supported"),
    (b'l', "Content-Length"),
    (b'm', "Contact"),
    (b'o', "Event"),
    (b'r', "Refer-To"),
    (b's', "Subject"),
    (b't', "To"),
    (b'u', "Allow-Events"),
    (b'v', "Via"),
    (b'x', "Session-Expires"),
    (b'y', "Identity"),
];

/// Long names we read, in their canonical spelling.
const KNOWN: &[&str] = &[
    "Via",
    "From",
    "To",
    "Call-ID",
    "CSeq",
    "Contact",
    "Content-Length",
    "Content-Type",
    "Max-Forwards",
    "Expires",
    "Min-Expires",
    "WWW-Authenticate",
    "Proxy-Authenticate",
    "Authorization",
    "Proxy-Authorization",
    "P-Asserted-Identity",
    "P-Preferred-Identity",
    "Remote-Party-ID",
    "Privacy",
    "User-Agent",
    "Server",
    "Allow",
    "Supported",
    "Route",
    "Record-Route",
    "Retry-After",
];

fn canonical_name(raw: &str) -> Option<Cow<'static, str>> {
    if raw.is_empty() || !raw.bytes().all(is_token_byte) {
        return None;
    }
    if raw.len() == 1 {
        let c = raw.as_bytes()[0].to_ascii_lowercase();
        if let Some((_, long)) = COMPACT.iter().find(|(k, _)| *k == c) {
            return Some(Cow::Borrowed(long));
        }
    }
    Some(match KNOWN.iter().find(|k| k.eq_ignore_ascii_case(raw)) {
        Some(known) => Cow::Borrowed(*known),
        None => Cow::Owned(raw.to_owned()),
    })
}

/// RFC 3261 s25.1 `token` characters.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-.!%*_+`'~".contains(&b)
}

/// Splits `value` at commas that are outside quotes and angle brackets.
pub fn split_commas(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quoted, mut angle, mut escaped) = (false, false, false);
    let mut start = 0;
    for (i, c) in value.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '<' if !quoted => angle = true,
            '>' if !quoted => angle = false,
            ',' if !quoted && !angle => {
                out.push(value[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(value[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

impl Message {
    /// Parses one datagram. Leading CRLFs (keep-alives, s7.5) are skipped; a
    /// datagram of nothing but CRLFs is `BadStartLine` (the caller should
    /// ignore those before calling, see [`is_keepalive`]).
    pub fn parse(bytes: &[u8]) -> Result<Message, ParseError> {
        if bytes.len() > DATAGRAM_BYTES_MAX {
            return Err(ParseError::TooLarge);
        }
        let bytes = after_leading_crlfs(bytes);
        let (head, body) = split_head(bytes).ok_or(ParseError::NoHeaderEnd)?;
        let head = std::str::from_utf8(head).map_err(|_| ParseError::NotUtf8)?;
        let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
        let start_line = parse_start_line(lines.next().unwrap_or(""))?;

        let mut values = String::with_capacity(head.len());
        let fields = parse_headers(lines, &mut values)?;
        let fields = split_vias(fields, &values)?;
        let message = Message {
            start: start_line,
            fields,
            values,
            // Both set by `checked`, from the headers.
            body: Vec::new(),
            cseq: (0, Method::Ack),
        };
        message.checked(body)
    }

    /// `self` with its body sized by Content-Length and its CSeq read,
    /// once every header a message must have is known to be there.
    fn checked(mut self, body: &[u8]) -> Result<Message, ParseError> {
        self.body = sized_body(self.header("Content-Length"), body)?;
        for required in ["Via", "From", "To", "Call-ID", "CSeq"] {
            if self.header(required).is_none() {
                return Err(ParseError::Missing(required));
            }
        }
        let cseq = parse_cseq(self.header("CSeq").ok_or(ParseError::Missing("CSeq"))?)?;
        if let StartLine::Request { method, .. } = &self.start {
            if *method != cseq.1 {
                return Err(ParseError::BadCSeq);
            }
        }
        self.cseq = cseq;
        Ok(self)
    }

    fn value(&self, field: &Field) -> &str {
        value_in(&self.values, field)
    }

    /// Every header field as (canonical name, value), in order.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.fields.iter().map(|f| (f.name.as_ref(), self.value(f)))
    }

    /// The first value of header `name` (canonical spelling).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| self.value(f))
    }

    /// Replaces every value of header `name` (canonical spelling) with
    /// `value`, added last: for tests that forge a peer's message.
    #[cfg(test)]
    pub(crate) fn set_header(&mut self, name: &'static str, value: &str) {
        self.fields.retain(|f| f.name != name);
        let start = span_end(&self.values);
        self.values.push_str(value);
        self.fields.push(Field {
            name: Cow::Borrowed(name),
            start,
            end: span_end(&self.values),
        });
    }

    /// Every value of header `name`, in order.
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |f| f.name == name)
            .map(|f| self.value(f))
    }

    pub fn method(&self) -> Option<&Method> {
        match &self.start {
            StartLine::Request { method, .. } => Some(method),
            StartLine::Response { .. } => None,
        }
    }

    pub fn request_uri(&self) -> Option<&str> {
        match &self.start {
            StartLine::Request { uri, .. } => Some(uri),
            StartLine::Response { .. } => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match &self.start {
            StartLine::Response { code, .. } => Some(*code),
            StartLine::Request { .. } => None,
        }
    }

    pub fn call_id(&self) -> &str {
        // Presence is checked by `parse`.
        self.header("Call-ID").unwrap_or("")
    }

    /// The topmost Via, parsed.
    pub fn top_via(&self) -> Option<Via<'_>> {
        self.header("Via").and_then(Via::parse)
    }
}

/// The header lines after the start line: folded lines joined to the
/// header they continue (s7.3.1), names made canonical, at most
/// [`HEADERS_COUNT_MAX`]. Values are appended to `values`, which the
/// fields point into.
fn parse_headers<'a>(
    lines: impl Iterator<Item = &'a str>,
    values: &mut String,
) -> Result<Vec<Field>, ParseError> {
    // Room for a typical INVITE's headers, so the list rarely grows.
    let mut fields: Vec<Field> = Vec::with_capacity(16);
    for line in lines {
        if line.is_empty() {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            // A continuation: joined to the previous header's value by a
            // single space (s7.3.1). That value is the last in `values`,
            // so it grows in place.
            let last = fields.last_mut().ok_or(ParseError::BadHeader)?;
            let more = line.trim();
            if !more.is_empty() {
                if last.end > last.start {
                    values.push(' ');
                }
                values.push_str(more);
                last.end = span_end(values);
            }
            continue;
        }
        let (name, value) = line.split_once(':').ok_or(ParseError::BadHeader)?;
        let name = canonical_name(name.trim_end()).ok_or(ParseError::BadHeader)?;
        let start = span_end(values);
        values.push_str(value.trim());
        fields.push(Field {
            name,
            start,
            end: span_end(values),
        });
        if fields.len() > HEADERS_COUNT_MAX {
            return Err(ParseError::TooManyHeaders);
        }
    }
    Ok(fields)
}

/// `field`'s value in `values`. Spans are made by the parser inside
/// `values`, at char boundaries (ends of trimmed slices and of whole
/// pushes); an out-of-range span would read as empty rather than panic.
fn value_in<'a>(values: &'a str, field: &Field) -> &'a str {
    values
        .get(field.start as usize..field.end as usize)
        .unwrap_or("")
}

/// Where the next value pushed to `values` starts. `values` never outgrows
/// the datagram's head (values are trimmed, and a fold's CRLF and white
/// space become one space), which [`DATAGRAM_BYTES_MAX`] bounds far below
/// `u32::MAX`.
fn span_end(values: &str) -> u32 {
    u32::try_from(values.len()).unwrap_or(u32::MAX)
}

/// Where `part`, a slice of `whole`, starts in it.
fn offset_in(whole: &str, part: &str) -> u32 {
    let offset = (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize);
    u32::try_from(offset).unwrap_or(u32::MAX)
}

/// The body as Content-Length says (all that came when there is none); a
/// length past what came is a truncated datagram.
fn sized_body(content_length: Option<&str>, body: &[u8]) -> Result<Vec<u8>, ParseError> {
    let content_length = match content_length {
        Some(v) => Some(
            v.parse::<usize>()
                .map_err(|_| ParseError::BadContentLength)?,
        ),
        None => None,
    };
    match content_length {
        Some(n) if n > body.len() => Err(ParseError::Truncated),
        Some(n) => Ok(body[..n].to_vec()),
        None => Ok(body.to_vec()),
    }
}

/// `bytes` after the CRLFs a sender may put before the start line (RFC
/// 3261 s7.5 asks that they be ignored): where the parser, and anything
/// that peeks at the start line without parsing, begins.
pub fn after_leading_crlfs(mut bytes: &[u8]) -> &[u8] {
    while let Some(rest) = bytes.strip_prefix(b"\r\n") {
        bytes = rest;
    }
    bytes
}

/// A datagram of only CR and LF bytes: a NAT keep-alive (RFC 5626 s3.5.1),
/// to be ignored without an answer.
pub fn is_keepalive(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|b| *b == b'\r' || *b == b'\n')
}

fn split_head(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    if let Some(i) = find(bytes, b"\r\n\r\n") {
        return Some((&bytes[..i], &bytes[i + 4..]));
    }
    // Bare LF line ends: not RFC-conformant, but cheap to accept.
    find(bytes, b"\n\n").map(|i| (&bytes[..i], &bytes[i + 2..]))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_start_line(line: &str) -> Result<StartLine, ParseError> {
    let mut parts = line.splitn(3, ' ');
    let (a, b, c) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    if a == "SIP/2.0" {
        let code: u16 = b.parse().map_err(|_| ParseError::BadStartLine)?;
        if !(100..=699).contains(&code) || b.len() != 3 {
            return Err(ParseError::BadStartLine);
        }
        return Ok(StartLine::Response {
            code,
            reason: c.to_owned(),
        });
    }
    if c != "SIP/2.0" || b.is_empty() || b.contains(char::is_whitespace) {
        return Err(ParseError::BadStartLine);
    }
    let method = Method::parse(a).ok_or(ParseError::BadStartLine)?;
    Ok(StartLine::Request {
        method,
        uri: b.to_owned(),
    })
}

fn parse_cseq(value: &str) -> Result<(u32, Method), ParseError> {
    let mut parts = value.split_whitespace();
    let number = parts
        .next()
        .and_then(|n| n.parse::<u32>().ok())
        .ok_or(ParseError::BadCSeq)?;
    let method = parts
        .next()
        .and_then(Method::parse)
        .ok_or(ParseError::BadCSeq)?;
    if parts.next().is_some() {
        return Err(ParseError::BadCSeq);
    }
    Ok((number, method))
}

/// Turns `Via: a, b` into two Via headers, in order (and drops an empty
/// Via). The split values are spans of the one they came from.
fn split_vias(fields: Vec<Field>, values: &str) -> Result<Vec<Field>, ParseError> {
    let (mut vias, mut folded) = (0usize, false);
    for f in fields.iter().filter(|f| f.name == "Via") {
        vias += 1;
        folded |= f.start == f.end || value_in(values, f).contains(',');
    }
    // Most messages have one Via per header line: keep the list as parsed.
    if !folded && vias <= VIA_COUNT_MAX {
        return Ok(fields);
    }
    let mut out = Vec::with_capacity(fields.len());
    vias = 0;
    for f in fields {
        if f.name != "Via" {
            out.push(f);
            continue;
        }
        for v in split_commas(value_in(values, &f)) {
            vias += 1;
            // `v` is a slice of `values`: its offset there is its span.
            let start = offset_in(values, v);
            out.push(Field {
                name: Cow::Borrowed("Via"),
                start,
                end: start.saturating_add(span_end(v)),
            });
        }
    }
    if out.len() > HEADERS_COUNT_MAX || vias > VIA_COUNT_MAX {
        return Err(ParseError::TooManyHeaders);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::response::{build_response, tag_of};
    use super::*;
    use std::net::SocketAddr;

    pub(crate) const INVITE: &str = "INVITE sip:+74950000001@127.0.0.1 SIP/2.0\r\n\
        Via: SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1;rport\r\n\
        From: <sip:89123456789@10.0.0.1>;tag=a\r\n\
        To: <sip:+74950000001@127.0.0.1>\r\n\
        Call-ID: x@y\r\n\
        CSeq: 1 INVITE\r\n\
        Max-Forwards: 70\r\n\
        Content-Length: 0\r\n\r\n";

    #[test]
    fn parses_a_plain_invite() {
        let m = Message::parse(INVITE.as_bytes()).unwrap();
        assert_eq!(m.method(), Some(&Method::Invite));
        assert_eq!(m.request_uri(), Some("sip:+74950000001@127.0.0.1"));
        assert_eq!(m.call_id(), "x@y");
        assert_eq!(m.cseq, (1, Method::Invite));
        let via = m.top_via().unwrap();
        assert_eq!(via.branch(), Some("z9hG4bK1"));
        assert_eq!(via.port, Some(5070));
    }

    #[test]
    fn vias_come_out_one_per_header_whether_folded_or_not() {
        let vias = "Via: SIP/2.0/UDP a:1;branch=z9hG4bKa\r\n\
            Via: SIP/2.0/UDP b:2;branch=z9hG4bKb, SIP/2.0/UDP c:3;branch=z9hG4bKc\r\n\
            Via:\r\n";
        let folded = INVITE.replace(
            "Via: SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1;rport\r\n",
            vias,
        );
        let m = Message::parse(folded.as_bytes()).unwrap();
        let got: Vec<&str> = m.headers_named("Via").collect();
        let want = [
            "SIP/2.0/UDP a:1;branch=z9hG4bKa",
            "SIP/2.0/UDP b:2;branch=z9hG4bKb",
            "SIP/2.0/UDP c:3;branch=z9hG4bKc",
        ];
        assert_eq!(got, want, "split in order, the empty one dropped");
        // One per line and none empty: the list as parsed, names borrowed.
        let m = Message::parse(INVITE.as_bytes()).unwrap();
        assert_eq!(m.headers_named("Via").count(), 1);
        assert!(m.fields.iter().all(|f| matches!(f.name, Cow::Borrowed(_))));
    }

    #[test]
    fn more_vias_than_the_limit_are_refused_on_lines_or_folded() {
        let via = "Via: SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1;rport\r\n";
        let with = |n: usize| INVITE.replace(via, &via.repeat(n));
        assert!(Message::parse(with(VIA_COUNT_MAX).as_bytes()).is_ok());
        assert_eq!(
            Message::parse(with(VIA_COUNT_MAX + 1).as_bytes()),
            Err(ParseError::TooManyHeaders)
        );
        let folded = format!(
            "Via: {}\r\n",
            vec!["SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1"; VIA_COUNT_MAX + 1].join(", ")
        );
        assert_eq!(
            Message::parse(INVITE.replace(via, &folded).as_bytes()),
            Err(ParseError::TooManyHeaders)
        );
    }

    #[test]
    fn an_extension_header_keeps_its_own_name() {
        let m = Message::parse(INVITE.replace("Max-Forwards", "X-Carrier-Hint").as_bytes());
        let h = m.unwrap();
        let ext = h
            .fields
            .iter()
            .find(|h| h.name == "X-Carrier-Hint")
            .unwrap();
        assert!(matches!(ext.name, Cow::Owned(_)));
    }

    #[test]
    fn compact_names_are_expanded() {
        let compact = INVITE
            .replace("Via:", "v:")
            .replace("From:", "f:")
            .replace("To:", "t:")
            .replace("Call-ID:", "i:")
            .replace("Content-Length:", "l:");
        let m = Message::parse(compact.as_bytes()).unwrap();
        assert_eq!(m.header("From"), Some("<sip:89123456789@10.0.0.1>;tag=a"));
        assert_eq!(m.header("Call-ID"), Some("x@y"));
        assert!(m.top_via().is_some());
    }

    #[test]
    fn folded_lines_are_joined_and_names_are_case_insensitive() {
        let folded = INVITE.replace("From: <sip", "fROM:\r\n   <sip");
        let m = Message::parse(folded.as_bytes()).unwrap();
        assert_eq!(m.header("From"), Some("<sip:89123456789@10.0.0.1>;tag=a"));
        let tab = INVITE.replace(";tag=a", "\r\n\t;tag=a");
        let m = Message::parse(tab.as_bytes()).unwrap();
        assert_eq!(m.header("From"), Some("<sip:89123456789@10.0.0.1> ;tag=a"));
        assert_eq!(tag_of(m.header("From").unwrap()).as_deref(), Some("a"));
    }

    #[test]
    fn several_vias_on_one_line_are_split_in_order() {
        let two = INVITE.replace(
            ";rport\r\n",
            ";rport, SIP/2.0/UDP 192.0.2.9;branch=z9hG4bK2\r\nVia: SIP/2.0/TCP h3;branch=z9hG4bK3\r\n",
        );
        let m = Message::parse(two.as_bytes()).unwrap();
        let vias: Vec<_> = m.headers_named("Via").collect();
        assert_eq!(vias.len(), 3);
        assert!(vias[1].starts_with("SIP/2.0/UDP 192.0.2.9"));
        assert!(vias[2].contains("z9hG4bK3"));
    }

    #[test]
    fn unknown_headers_are_kept_and_a_body_is_bounded_by_content_length() {
        let m = Message::parse(
            INVITE
                .replace("Content-Length: 0", "X-Thing: a: b\r\nContent-Length: 3")
                .replace("\r\n\r\n", "\r\n\r\nabcdef")
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(m.header("X-Thing"), Some("a: b"));
        assert_eq!(m.body, b"abc");
    }

    #[test]
    fn malformed_messages_are_errors() {
        let cases: Vec<(String, ParseError)> = vec![
            (INVITE.replace("\r\n\r\n", "\r\n"), ParseError::NoHeaderEnd),
            (
                INVITE.replace("SIP/2.0\r\nVia", "SIP/3.0\r\nVia"),
                ParseError::BadStartLine,
            ),
            (
                INVITE.replace("Call-ID: x@y\r\n", ""),
                ParseError::Missing("Call-ID"),
            ),
            (
                INVITE.replace("CSeq: 1 INVITE", "CSeq: 1 BYE"),
                ParseError::BadCSeq,
            ),
            (
                INVITE.replace("CSeq: 1 INVITE", "CSeq: x INVITE"),
                ParseError::BadCSeq,
            ),
            (
                INVITE.replace("Content-Length: 0", "Content-Length: 9"),
                ParseError::Truncated,
            ),
            (
                INVITE.replace("Content-Length: 0", "Content-Length: abc"),
                ParseError::BadContentLength,
            ),
            (
                INVITE.replace("Max-Forwards: 70", "no colon here"),
                ParseError::BadHeader,
            ),
            (
                INVITE.replace("Max-Forwards: 70", " folded-into-cseq"),
                ParseError::BadCSeq,
            ),
            (
                "SIP/2.0 99 Odd\r\n\r\n".to_owned(),
                ParseError::BadStartLine,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Message::parse(text.as_bytes()), Err(want), "{text:?}");
        }
        assert_eq!(
            Message::parse(&vec![b'a'; DATAGRAM_BYTES_MAX + 1]),
            Err(ParseError::TooLarge)
        );
        let many = INVITE.replace(
            "Max-Forwards: 70\r\n",
            &"X-A: 1\r\n".repeat(HEADERS_COUNT_MAX + 1),
        );
        assert_eq!(
            Message::parse(many.as_bytes()),
            Err(ParseError::TooManyHeaders)
        );
        assert!(Message::parse(&[0xff, 0xfe, b'\r', b'\n', b'\r', b'\n']).is_err());
        assert!(is_keepalive(b"\r\n\r\n"));
        assert!(!is_keepalive(b""));
    }

    #[test]
    fn via_stamping_and_response_targets() {
        let src: SocketAddr = "203.0.113.5:40000".parse().unwrap();
        let via = Via::parse("SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1;rport").unwrap();
        assert_eq!(via.response_target(src), src);
        assert_eq!(
            via.stamped(src),
            "SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1;rport=40000;received=203.0.113.5"
        );
        let no_rport = Via::parse("SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1").unwrap();
        assert_eq!(
            no_rport.response_target(src),
            "10.0.0.1:5070".parse().unwrap()
        );
        let stamped = no_rport.stamped(src);
        let received = Via::parse(&stamped).unwrap();
        assert_eq!(
            received.response_target(src),
            "203.0.113.5:5070".parse().unwrap()
        );
        let named = Via::parse("SIP/2.0/UDP pbx.example;branch=z9hG4bKx").unwrap();
        assert_eq!(
            named.response_target(src),
            "203.0.113.5:5060".parse().unwrap()
        );
        let v6 = Via::parse("SIP/2.0/UDP [2001:db8::1]:5080;branch=z9hG4bKy").unwrap();
        assert_eq!(v6.host, "[2001:db8::1]");
        assert_eq!(v6.port, Some(5080));
        assert!(Via::parse("SIP/2.0/UDP").is_none());
        assert!(Via::parse("HTTP/1.1/UDP a").is_none());
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0u32, 7, 10, 100, 603, 65_535, u32::MAX] {
            let mut out = String::from("x");
            super::super::via::push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }

    #[test]
    fn a_stamped_via_keeps_the_parameters_as_the_caller_wrote_them() {
        // Design choice: parameters are copied as written (names keep their
        // case, quoted values their quotes), only `received` is replaced
        // and `rport` filled in; the transport is written upper-case.
        let src: SocketAddr = "203.0.113.5:40000".parse().unwrap();
        let via = Via::parse(
            "SIP/2.0/udp 10.0.0.1:5070 ; Branch=z9hG4bKq;RPORT;received=192.0.2.1;x=\"a;b\"",
        )
        .unwrap();
        assert_eq!(
            via.branch(),
            Some("z9hG4bKq"),
            "names match case-insensitively"
        );
        assert_eq!(
            via.param("x"),
            Some(Some("a;b")),
            "a quoted ; is not a split"
        );
        assert_eq!(
            via.stamped(src),
            "SIP/2.0/UDP 10.0.0.1:5070;Branch=z9hG4bKq;RPORT=40000;x=\"a;b\";received=203.0.113.5",
            "design choice: parameters as written, received last"
        );
    }

    #[test]
    fn responses_copy_the_request_and_tag_the_to() {
        let req = Message::parse(INVITE.as_bytes()).unwrap();
        let vias = vec!["SIP/2.0/UDP 10.0.0.1:5070;branch=z9hG4bK1".to_owned()];
        let bytes = build_response(&req, &vias, 603, Some("t1"), &[]);
        let resp = Message::parse(&bytes).unwrap();
        assert_eq!(resp.status(), Some(603));
        assert_eq!(
            resp.header("To"),
            Some("<sip:+74950000001@127.0.0.1>;tag=t1")
        );
        assert_eq!(resp.cseq, (1, Method::Invite));
        let trying = Message::parse(&build_response(&req, &vias, 100, Some("t1"), &[])).unwrap();
        assert_eq!(trying.header("To"), Some("<sip:+74950000001@127.0.0.1>"));
    }

    #[test]
    fn commas_inside_quotes_and_brackets_do_not_split() {
        assert_eq!(
            split_commas(r#""Doe, J" <sip:a@b;x=1,2>, <sip:c@d>"#),
            vec![r#""Doe, J" <sip:a@b;x=1,2>"#, "<sip:c@d>"]
        );
    }
}
