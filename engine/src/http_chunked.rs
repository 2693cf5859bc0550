//! The chunked transfer coding of a request body (RFC 9112 section 7.1),
//! decoded incrementally and within limits, without IO.
//!
//! A recipient must be able to parse the chunked coding, and common clients
//! send it when they stream a body (Go's client, `curl -T -`, Python's
//! requests with a generator). The decoder takes the bytes as they arrive
//! ([`Chunked::feed`]), keeps only the decoded body and the line it is in
//! the middle of, and stops at the end of the message, so bytes after it
//! stay for the next request on the connection. It is strict where leniency
//! lets two parsers disagree about where a message ends (request
//! smuggling): lines end in CRLF only, a chunk size is hex digits only, and
//! a chunk's data must be followed by CRLF. Chunk extensions and trailer
//! fields are read past and dropped: nothing of this API uses them.
//!
//! Not for: deciding whether a request is chunked (see
//! [`crate::http_head::framing`]), or reading sockets and deadlines (the
//! binary's connection loop).

use crate::http_head::Reject;

/// The longest chunk-size line, extensions included.
pub const SIZE_LINE_BYTES_MAX: usize = 1024;

const MALFORMED: Reject = Reject {
    status: 400,
    text: "Malformed chunked body.",
};
const TOO_LARGE: Reject = Reject {
    status: 413,
    text: "Request body too large.",
};
const TRAILERS_TOO_LARGE: Reject = Reject {
    status: 431,
    text: "Request header fields too large.",
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a chunk-size line (into `line`).
    Size,
    /// Reading this many more bytes of chunk data.
    Data(usize),
    /// Expecting the CR, then the LF, after a chunk's data.
    DataCr,
    DataLf,
    /// Reading trailer lines (into `line`) up to the empty one.
    Trailer,
    Done,
}

/// An incremental decoder of one chunked body. See the module docs.
#[derive(Debug)]
pub struct Chunked {
    state: State,
    line: Vec<u8>,
    body: Vec<u8>,
    body_bytes_max: usize,
    trailer_bytes: usize,
    trailer_bytes_max: usize,
}

impl Chunked {
    /// A decoder that refuses a body over `body_bytes_max` decoded bytes
    /// (413) or trailers over `trailer_bytes_max` (431).
    pub fn new(body_bytes_max: usize, trailer_bytes_max: usize) -> Chunked {
        Chunked {
            state: State::Size,
            line: Vec::new(),
            body: Vec::new(),
            body_bytes_max,
            trailer_bytes: 0,
            trailer_bytes_max,
        }
    }

    /// Decodes from `input` (the bytes after those already fed). Returns
    /// how many it used: all of them unless the body ended inside them.
    pub fn feed(&mut self, input: &[u8]) -> Result<usize, Reject> {
        let mut used = 0;
        while used < input.len() && self.state != State::Done {
            let rest = &input[used..];
            used += match self.state {
                State::Size | State::Trailer => self.line_bytes(rest)?,
                State::Data(left) => self.data(rest, left),
                State::DataCr => self.expect(rest[0], b'\r', State::DataLf)?,
                State::DataLf => self.expect(rest[0], b'\n', State::Size)?,
                State::Done => 0,
            };
        }
        Ok(used)
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The decoded body (complete once [`Chunked::is_done`]).
    pub fn into_body(self) -> Vec<u8> {
        self.body
    }

    fn expect(&mut self, got: u8, want: u8, next: State) -> Result<usize, Reject> {
        if got != want {
            return Err(MALFORMED);
        }
        self.state = next;
        Ok(1)
    }

    fn data(&mut self, rest: &[u8], left: usize) -> usize {
        let take = left.min(rest.len());
        self.body.extend_from_slice(&rest[..take]);
        self.state = if take == left {
            State::DataCr
        } else {
            State::Data(left - take)
        };
        take
    }

    /// Takes bytes of the current line up to its LF; a whole line is then
    /// handled as a size line or a trailer line.
    fn line_bytes(&mut self, rest: &[u8]) -> Result<usize, Reject> {
        let (take, complete) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (rest.len(), false),
        };
        let limit = match self.state {
            State::Size => SIZE_LINE_BYTES_MAX,
            _ => self.trailer_bytes_max - self.trailer_bytes.min(self.trailer_bytes_max),
        };
        if self.line.len() + take > limit {
            return Err(if self.state == State::Size {
                MALFORMED
            } else {
                TRAILERS_TOO_LARGE
            });
        }
        self.line.extend_from_slice(&rest[..take]);
        if complete {
            let line = std::mem::take(&mut self.line);
            let content = line.strip_suffix(b"\r\n").ok_or(MALFORMED)?;
            match self.state {
                State::Size => self.size_line(content)?,
                _ => self.trailer_line(content, line.len())?,
            }
        }
        Ok(take)
    }

    fn size_line(&mut self, content: &[u8]) -> Result<(), Reject> {
        let digits = content.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        let ext = &content[digits..];
        if digits == 0 || !extension_ok(ext) {
            return Err(MALFORMED);
        }
        let size = parse_hex(&content[..digits]).ok_or(TOO_LARGE)?;
        if size > self.body_bytes_max - self.body.len() {
            return Err(TOO_LARGE);
        }
        self.state = if size == 0 {
            State::Trailer
        } else {
            State::Data(size)
        };
        Ok(())
    }

    fn trailer_line(&mut self, content: &[u8], raw_len: usize) -> Result<(), Reject> {
        if content.is_empty() {
            self.state = State::Done;
            return Ok(());
        }
        // A field line: a name, a colon, a value without controls other
        // than tab. Its content is dropped.
        let colon = content.iter().position(|&b| b == b':').ok_or(MALFORMED)?;
        let name_ok = colon > 0 && content[..colon].iter().all(|&b| is_tchar(b));
        let value_ok = content[colon + 1..]
            .iter()
            .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f));
        if !name_ok || !value_ok {
            return Err(MALFORMED);
        }
        self.trailer_bytes += raw_len;
        Ok(())
    }
}

/// `*( BWS ";" BWS name [ BWS "=" BWS value ] )`, checked only for
/// characters: a chunk extension is visible ASCII, spaces and tabs.
fn extension_ok(ext: &[u8]) -> bool {
    let first = ext.iter().find(|&&b| b != b' ' && b != b'\t');
    (first.is_none() || first == Some(&b';'))
        && ext
            .iter()
            .all(|&b| b == b' ' || b == b'\t' || (0x21..0x7f).contains(&b))
}

fn parse_hex(digits: &[u8]) -> Option<usize> {
    // More than 15 hex digits cannot fit any body limit; refusing them
    // here also keeps the sum below from overflowing.
    if digits.len() > 15 {
        return None;
    }
    let mut n: usize = 0;
    for &d in digits {
        let v = char::from(d).to_digit(16)?;
        n = n.checked_mul(16)?.checked_add(v as usize)?;
    }
    Some(n)
}

/// RFC 9110's `tchar`: the characters of a token (a field name).
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Decodes `data` as a chunked body in pieces of every size from 1 byte up
/// (for fuzzing: any panic is a bug, and every split must agree).
pub fn exercise(data: &[u8]) {
    let whole = {
        let mut c = Chunked::new(64 * 1024, 16 * 1024);
        c.feed(data).map(|used| (used, c.is_done(), c.into_body()))
    };
    for piece in [1, 2, 7, 64] {
        let mut c = Chunked::new(64 * 1024, 16 * 1024);
        let mut used = 0;
        let mut result = Ok(());
        for part in data.chunks(piece) {
            match c.feed(part) {
                Ok(n) => used += n,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            if c.is_done() {
                break;
            }
        }
        let split = result.map(|()| (used, c.is_done(), c.into_body()));
        assert_eq!(whole, split, "splitting by {piece} changed the outcome");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &[u8]) -> Result<(Vec<u8>, usize), Reject> {
        let mut c = Chunked::new(64 * 1024, 1024);
        let used = c.feed(input)?;
        assert!(c.is_done(), "not done after {input:?}");
        Ok((c.into_body(), used))
    }

    #[test]
    fn decodes_chunks_extensions_and_trailers_and_stops_at_the_end() {
        let input = b"4\r\nWiki\r\n5;name=value\r\npedia\r\n0\r\nX-Trace: 1\r\n\r\nGET / HTTP/1.1";
        let (body, used) = decode(input).unwrap();
        assert_eq!(body, b"Wikipedia");
        assert_eq!(&input[used..], b"GET / HTTP/1.1");
        let (body, _) = decode(b"A\r\n0123456789\r\n000\r\n\r\n").unwrap();
        assert_eq!(body, b"0123456789");
    }

    #[test]
    fn byte_by_byte_gives_the_same_body() {
        let input = b"3\r\nabc\r\n1 ; x = \"y\"\r\nd\r\n0\r\n\r\n";
        let mut c = Chunked::new(64, 64);
        for b in input {
            assert!(!c.is_done());
            assert_eq!(c.feed(std::slice::from_ref(b)).unwrap(), 1);
        }
        assert!(c.is_done());
        assert_eq!(c.into_body(), b"abcd");
        exercise(input);
    }

    #[test]
    fn anything_a_lenient_parser_might_read_differently_is_refused() {
        for bad in [
            &b"4\nWiki\r\n0\r\n\r\n"[..], // bare LF after the size
            b"4\r\nWikiX\r\n0\r\n\r\n",   // data longer than its size
            b"4\r\nWiki\n0\r\n\r\n",      // bare LF after the data
            b"-4\r\nWiki\r\n0\r\n\r\n",   // a sign
            b"0x4\r\nWiki\r\n0\r\n\r\n",  // a prefix
            b" 4\r\nWiki\r\n0\r\n\r\n",   // leading space
            b"\r\n",                      // no size
            b"4 x\r\nWiki\r\n0\r\n\r\n",  // junk that is not an extension
            b"0\r\nno colon\r\n\r\n",     // malformed trailer
            b"0\r\nX: a\x01b\r\n\r\n",    // control in a trailer
        ] {
            let mut c = Chunked::new(64, 64);
            assert_eq!(
                c.feed(bad),
                Err(MALFORMED),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn limits_are_413_and_431() {
        let mut c = Chunked::new(8, 64);
        assert_eq!(c.feed(b"5\r\nabcde\r\n4\r\n"), Err(TOO_LARGE));
        let mut c = Chunked::new(8, 64);
        assert_eq!(c.feed(b"ffffffffffffffffff\r\n"), Err(TOO_LARGE));
        let mut c = Chunked::new(8, 16);
        assert_eq!(
            c.feed(b"0\r\nX-Long: 0123456789abcdef\r\n\r\n"),
            Err(TRAILERS_TOO_LARGE)
        );
        let long_size_line = format!("1;{}\r\n", "x".repeat(SIZE_LINE_BYTES_MAX));
        let mut c = Chunked::new(8, 16);
        assert_eq!(c.feed(long_size_line.as_bytes()), Err(MALFORMED));
    }

    #[test]
    fn an_unfinished_body_is_not_done() {
        let mut c = Chunked::new(64, 64);
        assert_eq!(c.feed(b"4\r\nWi").unwrap(), 5);
        assert!(!c.is_done());
        assert_eq!(c.feed(b"ki\r\n0\r\n\r").unwrap(), 8);
        assert!(!c.is_done());
        assert_eq!(c.feed(b"\n").unwrap(), 1);
        assert!(c.is_done());
    }
}
