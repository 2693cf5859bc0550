//! The request-body JSON reader, answering exactly as DRF's `JSONParser`.
//!
//! DRF decodes the body as UTF-8 with a `codecs` stream reader and hands it
//! to Python's `json.load` with NaN and Infinity refused. Clients of the
//! original see Python's messages (`Expecting value: line 1 column 1 (char
//! 0)`), and Python's value model: integers of any size, floats printed by
//! `repr`, lone UTF-16 surrogates kept in strings. This reader reproduces
//! those messages and positions (CPython 3.11's C scanner) and that model,
//! which `serde_json` cannot: it has its own messages, rounds big integers
//! to f64 and refuses lone surrogates.
//!
//! It keeps only what create validation needs: the top-level value's type
//! and, when it is an object, the scalar values of a few wanted keys
//! (containers are reduced to "a list" / "a dict"). It never recurses: an
//! explicit stack, capped at [`JSON_NESTING_DEPTH_MAX`], tracks nesting, so a
//! hostile body cannot overflow a small coroutine stack on the way in or on
//! drop.
//!
//! Not for: general JSON handling (use `serde_json`), rendering, or any body
//! other than the create request's.
//!
//! Slightly over the project's ~500 lines on purpose: one scanner whose
//! every error position must match CPython's, kept in one place so the
//! positions are computed one way.
//!
//! One file of ~590 lines (beyond the ~500 the project aims at): the
//! scanner is one state machine whose every branch sets the message and
//! position CPython would report, and keeping it whole is what lets it be
//! read against CPython's scanner branch by branch.

use super::pytext;

/// Deepest nesting of arrays and objects accepted. Python has no such limit
/// short of its recursion limit (which makes DRF answer 500 somewhere near
/// 1000 levels); we answer a clean 400 instead, well below that.
pub const JSON_NESTING_DEPTH_MAX: usize = 512;

/// CPython 3.11's `sys.get_int_max_str_digits()` default: an integer literal
/// with more digits makes `json.loads` raise ValueError.
pub(crate) const INT_DIGITS_MAX: usize = 4300;

/// A string value as Python holds it. A `\uD800`-style escape that is not
/// half of a surrogate pair is a legal Python character but not a Rust
/// `char`: it is stored as U+FFFD (one character, like the original, so
/// lengths agree) and remembered, because DRF refuses such strings by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct JsonStr {
    pub(crate) text: String,
    pub(crate) first_lone_surrogate: Option<u16>,
}

/// A JSON value reduced to what field validation looks at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    /// `str()` of the Python int: the literal's digits, `-0` written `0`.
    Int(String),
    Float(f64),
    Str(JsonStr),
    List,
    Dict,
}

impl Value {
    /// Python's `type(value).__name__`, as DRF puts it in messages.
    pub(crate) fn python_type_name(&self) -> &'static str {
        match self {
            Value::Null => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::List => "list",
            Value::Dict => "dict",
        }
    }
}

/// The parsed body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Document {
    /// A top-level object: slot `i` holds the last value given for
    /// `wanted[i]` (Python dicts keep the last duplicate), `None` if absent.
    Object(Vec<Option<Value>>),
    /// Any other top-level value.
    NotObject(Value),
}

/// Parse `body` the way DRF's JSONParser does. `Err` carries the text that
/// follows `JSON parse error - `.
pub(crate) fn parse(body: &[u8], wanted: &[&str]) -> Result<Document, String> {
    let text = decode_utf8(body)?;
    if text.starts_with('\u{feff}') {
        return Err(positioned(
            text,
            0,
            "Unexpected UTF-8 BOM (decode using utf-8-sig)",
        ));
    }
    Scanner::new(text, wanted).document()
}

/// UTF-8 decoding as `codecs.getreader('utf-8')(stream).read()` does it: the
/// first invalid sequence is an error in Python's words, but an incomplete
/// sequence at the very end is silently dropped (the reader decodes with
/// `final=False` and keeps those bytes for a next read that never comes).
fn decode_utf8(body: &[u8]) -> Result<&str, String> {
    match std::str::from_utf8(body) {
        Ok(text) => Ok(text),
        Err(err) => {
            let start = err.valid_up_to();
            let Some(bad_len) = err.error_len() else {
                // Truncated sequence at the end: the prefix is valid UTF-8.
                return Ok(std::str::from_utf8(&body[..start]).unwrap_or(""));
            };
            let first = body.get(start).copied().unwrap_or(0);
            let reason = if (0x80..=0xc1).contains(&first) || first >= 0xf5 {
                "invalid start byte"
            } else {
                "invalid continuation byte"
            };
            Err(if bad_len == 1 {
                format!(
                    "'utf-8' codec can't decode byte 0x{first:02x} in position {start}: {reason}"
                )
            } else {
                format!(
                    "'utf-8' codec can't decode bytes in position {start}-{}: {reason}",
                    start + bad_len - 1
                )
            })
        }
    }
}

/// Python's `JSONDecodeError` text: `<msg>: line L column C (char P)`, with
/// positions counted in characters, not bytes.
fn positioned(text: &str, byte_pos: usize, msg: &str) -> String {
    let before = text.get(..byte_pos).unwrap_or(text);
    let char_pos = pytext::char_len(before);
    let line = before.matches('\n').count() + 1;
    let column = match before.rfind('\n') {
        Some(nl) => char_pos - pytext::char_len(&before[..nl]),
        None => char_pos + 1,
    };
    format!("{msg}: line {line} column {column} (char {char_pos})")
}

/// What follows a complete value.
enum AfterValue {
    /// Another value is to be read (the cursor is at it).
    NextValue,
    /// The document ended.
    End,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Container {
    Array,
    Object,
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    wanted: &'a [&'a str],
    stack: Vec<Container>,
    /// Scratch buffer for strings that are validated but not kept.
    scratch: JsonStr,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str, wanted: &'a [&'a str]) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            wanted,
            stack: Vec::new(),
            scratch: JsonStr::default(),
        }
    }

    fn error(&self, byte_pos: usize, msg: &str) -> String {
        positioned(self.text, byte_pos, msg)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// JSON whitespace is only these four, in Python as in RFC 8259.
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn document(mut self) -> Result<Document, String> {
        let mut members: Vec<Option<Value>> = vec![None; self.wanted.len()];
        let mut top: Option<Value> = None;
        // Which wanted slot the value being read belongs to, if any.
        let mut slot: Option<usize> = None;
        self.skip_ws();
        loop {
            let depth = self.stack.len();
            let keep = depth == 0 || (depth == 1 && slot.is_some());
            let start = self.pos;
            let value = match self.peek() {
                Some(open @ (b'[' | b'{')) => {
                    let marker = self.open(open, start)?;
                    if keep {
                        self.store(depth, slot, &mut top, &mut members, marker);
                    }
                    if !self.close_if_empty() {
                        if self.stack.last() == Some(&Container::Object) {
                            slot = self.member_key()?;
                        }
                        continue;
                    }
                    None
                }
                Some(b'"') => {
                    if keep {
                        let mut s = JsonStr::default();
                        self.string(&mut s)?;
                        Some(Value::Str(s))
                    } else {
                        self.string_into_scratch()?;
                        None
                    }
                }
                Some(_) => Some(self.scalar(keep)?),
                None => return Err(self.error(start, "Expecting value")),
            };
            if let Some(value) = value {
                if keep {
                    self.store(depth, slot, &mut top, &mut members, value);
                }
            }
            match self.after_value(&mut slot)? {
                AfterValue::NextValue => {}
                AfterValue::End => {
                    return Ok(match top {
                        Some(Value::Dict) => Document::Object(members),
                        Some(other) => Document::NotObject(other),
                        // Unreachable: a complete document has a value.
                        None => Document::NotObject(Value::Null),
                    });
                }
            }
        }
    }

    /// Opens the container at `start` (its first byte `open`), within the
    /// nesting limit; returns the value that stands for it.
    fn open(&mut self, open: u8, start: usize) -> Result<Value, String> {
        if self.stack.len() >= JSON_NESTING_DEPTH_MAX {
            return Err(self.error(
                start,
                &format!("Nesting deeper than {JSON_NESTING_DEPTH_MAX} levels"),
            ));
        }
        let (kind, marker) = if open == b'[' {
            (Container::Array, Value::List)
        } else {
            (Container::Object, Value::Dict)
        };
        self.pos += 1;
        self.stack.push(kind);
        self.skip_ws();
        Ok(marker)
    }

    /// After [`Self::open`]: closes the container if its closing byte comes
    /// at once (an empty container is a complete value).
    fn close_if_empty(&mut self) -> bool {
        let close = match self.stack.last() {
            Some(Container::Array) => b']',
            Some(Container::Object) => b'}',
            None => return false,
        };
        if self.peek() == Some(close) {
            self.pos += 1;
            self.stack.pop();
            true
        } else {
            false
        }
    }

    /// A value is complete: closes containers and finds the next value (its
    /// member key first, in an object), or the end of the document.
    fn after_value(&mut self, slot: &mut Option<usize>) -> Result<AfterValue, String> {
        loop {
            self.skip_ws();
            let Some(kind) = self.stack.last().copied() else {
                if self.pos != self.bytes.len() {
                    return Err(self.error(self.pos, "Extra data"));
                }
                return Ok(AfterValue::End);
            };
            let close = if kind == Container::Array { b']' } else { b'}' };
            match self.peek() {
                Some(b) if b == close => {
                    self.pos += 1;
                    self.stack.pop();
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                    if kind == Container::Object {
                        *slot = self.member_key()?;
                    }
                    return Ok(AfterValue::NextValue);
                }
                _ => return Err(self.error(self.pos, "Expecting ',' delimiter")),
            }
        }
    }

    fn store(
        &self,
        depth: usize,
        slot: Option<usize>,
        top: &mut Option<Value>,
        members: &mut [Option<Value>],
        value: Value,
    ) {
        if depth == 0 {
            *top = Some(value);
        } else if let Some(entry) = slot.and_then(|i| members.get_mut(i)) {
            *entry = Some(value);
        }
    }

    /// Read `"key" :` and the whitespace after it; returns the wanted slot
    /// when the key belongs to the top-level object and is one we keep.
    fn member_key(&mut self) -> Result<Option<usize>, String> {
        if self.peek() != Some(b'"') {
            return Err(self.error(
                self.pos,
                "Expecting property name enclosed in double quotes",
            ));
        }
        self.string_into_scratch()?;
        let key = &self.scratch;
        let slot = if self.stack.len() == 1 && key.first_lone_surrogate.is_none() {
            self.wanted.iter().position(|w| *w == key.text)
        } else {
            None
        };
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.error(self.pos, "Expecting ':' delimiter"));
        }
        self.pos += 1;
        self.skip_ws();
        Ok(slot)
    }

    /// Read a string into the reusable scratch buffer: for keys, and for
    /// values nobody keeps (they must still be valid).
    fn string_into_scratch(&mut self) -> Result<(), String> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let result = self.string(&mut scratch);
        self.scratch = scratch;
        result
    }

    /// Literals and numbers (`scan_once` minus strings and containers).
    fn scalar(&mut self, keep: bool) -> Result<Value, String> {
        let start = self.pos;
        let rest = &self.bytes[start..];
        for (word, value) in [
            (&b"null"[..], Value::Null),
            (&b"true"[..], Value::Bool(true)),
            (&b"false"[..], Value::Bool(false)),
        ] {
            if rest.starts_with(word) {
                self.pos += word.len();
                return Ok(value);
            }
        }
        // DRF passes `parse_constant=strict_constant`, which turns these
        // Python extensions into a ValueError without a position.
        for constant in ["NaN", "Infinity", "-Infinity"] {
            if rest.starts_with(constant.as_bytes()) {
                return Err(format!(
                    "Out of range float values are not JSON compliant: '{constant}'"
                ));
            }
        }
        self.number(keep)
    }

    /// `_match_number_unicode`: an optional '-', an integer part without
    /// leading zeros, then a fraction and an exponent only if digits follow
    /// them (`1.` and `1e` stop before the '.' or 'e').
    fn number(&mut self, keep: bool) -> Result<Value, String> {
        let b = self.bytes;
        let start = self.pos;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'1'..=b'9') => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            Some(b'0') => i += 1,
            _ => return Err(self.error(start, "Expecting value")),
        }
        let int_end = i;
        let mut is_float = false;
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            is_float = true;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let digits_start = j;
            while b.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if j > digits_start {
                i = j;
                is_float = true;
            }
        }
        self.pos = i;
        let literal = &self.text[start..i];
        if is_float {
            // Rust's parse is correctly rounded like Python's float(); it
            // yields inf for out-of-range literals, as Python does.
            return Ok(Value::Float(literal.parse().unwrap_or(f64::NAN)));
        }
        let digits = int_end - start - usize::from(literal.starts_with('-'));
        if digits > INT_DIGITS_MAX {
            return Err(format!(
                "Exceeds the limit ({INT_DIGITS_MAX} digits) for integer string conversion: \
                 value has {digits} digits; use sys.set_int_max_str_digits() to increase the limit"
            ));
        }
        Ok(if !keep {
            // Nobody reads it; skip copying the digits.
            Value::Null
        } else if literal == "-0" {
            Value::Int("0".to_owned())
        } else {
            Value::Int(literal.to_owned())
        })
    }

    /// `scanstring` in strict mode, from the opening quote at `self.pos`.
    fn string(&mut self, out: &mut JsonStr) -> Result<(), String> {
        out.text.clear();
        out.first_lone_surrogate = None;
        let begin = self.pos;
        let b = self.bytes;
        let mut i = begin + 1;
        let mut run_start = i;
        // A high surrogate waiting to see whether a low one follows.
        let mut pending_high: Option<u16> = None;
        loop {
            let Some(&c) = b.get(i) else {
                return Err(self.error(begin, "Unterminated string starting at"));
            };
            if c != b'"' && c != b'\\' && c >= 0x20 {
                i += 1;
                continue;
            }
            // Copy the plain run; byte boundaries here are ASCII, so the
            // slice is valid UTF-8.
            if i > run_start {
                flush_lone(out, &mut pending_high);
                out.text.push_str(&self.text[run_start..i]);
            }
            match c {
                b'"' => {
                    flush_lone(out, &mut pending_high);
                    self.pos = i + 1;
                    return Ok(());
                }
                b'\\' => {
                    let Some(&esc) = b.get(i + 1) else {
                        return Err(self.error(begin, "Unterminated string starting at"));
                    };
                    i = if esc == b'u' {
                        self.unicode_escape(i + 1, out, &mut pending_high)?
                    } else {
                        let decoded =
                            simple_escape(esc).ok_or_else(|| self.error(i, "Invalid \\escape"))?;
                        flush_lone(out, &mut pending_high);
                        out.text.push(decoded);
                        i + 2
                    };
                    run_start = i;
                }
                _ => return Err(self.error(i, "Invalid control character at")),
            }
        }
    }

    /// A `\uXXXX` escape whose `u` is at `u_pos`: surrogate halves are
    /// paired when they come in order, and kept lone (as Python does)
    /// otherwise. Returns the position after the escape.
    fn unicode_escape(
        &self,
        u_pos: usize,
        out: &mut JsonStr,
        pending_high: &mut Option<u16>,
    ) -> Result<usize, String> {
        let unit = self.hex4(u_pos)?;
        match unit {
            0xd800..=0xdbff => {
                flush_lone(out, pending_high);
                *pending_high = Some(unit);
            }
            0xdc00..=0xdfff => match pending_high.take() {
                Some(high) => {
                    let code =
                        0x10000 + ((u32::from(high) - 0xd800) << 10) + (u32::from(unit) - 0xdc00);
                    out.text.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                }
                None => push_lone(out, unit),
            },
            _ => {
                flush_lone(out, pending_high);
                out.text
                    .push(char::from_u32(u32::from(unit)).unwrap_or('\u{fffd}'));
            }
        }
        Ok(u_pos + 5)
    }

    /// The four hex digits after the `u` at `u_pos`. Like CPython, it also
    /// wants at least one character after them (the closing quote at
    /// least), and reports every failure at the `u`.
    fn hex4(&self, u_pos: usize) -> Result<u16, String> {
        let fail = || self.error(u_pos, "Invalid \\uXXXX escape");
        if u_pos + 5 >= self.bytes.len() {
            return Err(fail());
        }
        let digits = self.bytes.get(u_pos + 1..u_pos + 5).ok_or_else(fail)?;
        let mut unit: u16 = 0;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or_else(fail)?;
            unit = (unit << 4) | v as u16;
        }
        Ok(unit)
    }
}

fn push_lone(out: &mut JsonStr, unit: u16) {
    out.text.push('\u{fffd}');
    out.first_lone_surrogate.get_or_insert(unit);
}

/// The character a one-letter JSON escape stands for.
fn simple_escape(esc: u8) -> Option<char> {
    Some(match esc {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

fn flush_lone(out: &mut JsonStr, pending_high: &mut Option<u16>) {
    if let Some(high) = pending_high.take() {
        push_lone(out, high);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> String {
        match parse(body.as_bytes(), &[]) {
            Err(e) => e,
            Ok(doc) => panic!("{body:?} parsed: {doc:?}"),
        }
    }

    fn top(body: &str) -> Value {
        match parse(body.as_bytes(), &[]) {
            Ok(Document::NotObject(v)) => v,
            other => panic!("{body:?}: {other:?}"),
        }
    }

    fn member(body: &str, key: &str) -> Option<Value> {
        match parse(body.as_bytes(), &[key]) {
            Ok(Document::Object(mut m)) => m.pop().flatten(),
            other => panic!("{body:?}: {other:?}"),
        }
    }

    /// Every right-hand side is what CPython 3.11's `json.loads` says
    /// (with DRF's parse_constant) for the left-hand side.
    #[test]
    fn error_messages_match_python() {
        let cases: &[(&str, &str)] = &[
            ("", "Expecting value: line 1 column 1 (char 0)"),
            ("   ", "Expecting value: line 1 column 4 (char 3)"),
            (" \n ", "Expecting value: line 2 column 2 (char 3)"),
            ("[", "Expecting value: line 1 column 2 (char 1)"),
            ("[  ", "Expecting value: line 1 column 4 (char 3)"),
            ("[1", "Expecting ',' delimiter: line 1 column 3 (char 2)"),
            ("[1  ", "Expecting ',' delimiter: line 1 column 5 (char 4)"),
            ("[1,", "Expecting value: line 1 column 4 (char 3)"),
            ("[1,]", "Expecting value: line 1 column 4 (char 3)"),
            ("[1 2]", "Expecting ',' delimiter: line 1 column 4 (char 3)"),
            ("[,", "Expecting value: line 1 column 2 (char 1)"),
            ("[\n1\n,\n]", "Expecting value: line 4 column 1 (char 6)"),
            (
                "{",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            (
                "{  ",
                "Expecting property name enclosed in double quotes: line 1 column 4 (char 3)",
            ),
            (
                "{\"a\"",
                "Expecting ':' delimiter: line 1 column 5 (char 4)",
            ),
            (
                "{\"a\" 1}",
                "Expecting ':' delimiter: line 1 column 6 (char 5)",
            ),
            ("{\"a\":", "Expecting value: line 1 column 6 (char 5)"),
            (
                "{\"a\":1",
                "Expecting ',' delimiter: line 1 column 7 (char 6)",
            ),
            (
                "{\"a\":1 \"b\"}",
                "Expecting ',' delimiter: line 1 column 8 (char 7)",
            ),
            (
                "{\"a\":1,}",
                "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)",
            ),
            (
                "{\"a\":1,\"b\"",
                "Expecting ':' delimiter: line 1 column 11 (char 10)",
            ),
            (
                "{1:2}",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            (
                "{,",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            ("{\"a\":[}", "Expecting value: line 1 column 7 (char 6)"),
            ("{\"a\":-}", "Expecting value: line 1 column 6 (char 5)"),
            (
                "\n\n  {\"a\" x",
                "Expecting ':' delimiter: line 3 column 8 (char 9)",
            ),
            ("{\"a\":1}  \n x", "Extra data: line 2 column 2 (char 11)"),
            (
                "\"abc",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            (
                "\"a\\",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            (
                "\"abc\\\"",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            ("\"a\\x\"", "Invalid \\escape: line 1 column 3 (char 2)"),
            ("\"\\U0041\"", "Invalid \\escape: line 1 column 2 (char 1)"),
            (
                "\"\\u12\"",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            (
                "\"\\u12g4\"",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            (
                "\"\\u0041",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            ("\"\\u", "Invalid \\uXXXX escape: line 1 column 3 (char 2)"),
            (
                "\"\\ud800",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            (
                "\"\\ud800\\u12\"",
                "Invalid \\uXXXX escape: line 1 column 9 (char 8)",
            ),
            (
                "\"\\ud800\\udc00",
                "Invalid \\uXXXX escape: line 1 column 9 (char 8)",
            ),
            (
                "[\"\\ud800\\udc00",
                "Invalid \\uXXXX escape: line 1 column 10 (char 9)",
            ),
            (
                "\"\\ud800\\x\"",
                "Invalid \\escape: line 1 column 8 (char 7)",
            ),
            (
                "\"\\ud800x",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            (
                "\"a\u{1}\"",
                "Invalid control character at: line 1 column 3 (char 2)",
            ),
            (
                "\"a\tb\"",
                "Invalid control character at: line 1 column 3 (char 2)",
            ),
            (
                "\"\n\"",
                "Invalid control character at: line 1 column 2 (char 1)",
            ),
            ("-", "Expecting value: line 1 column 1 (char 0)"),
            ("-a", "Expecting value: line 1 column 1 (char 0)"),
            ("[-]", "Expecting value: line 1 column 2 (char 1)"),
            ("01", "Extra data: line 1 column 2 (char 1)"),
            ("1.", "Extra data: line 1 column 2 (char 1)"),
            ("1.e5", "Extra data: line 1 column 2 (char 1)"),
            ("1e", "Extra data: line 1 column 2 (char 1)"),
            ("1e+", "Extra data: line 1 column 2 (char 1)"),
            (".5", "Expecting value: line 1 column 1 (char 0)"),
            ("+1", "Expecting value: line 1 column 1 (char 0)"),
            (
                "[1e5x]",
                "Expecting ',' delimiter: line 1 column 5 (char 4)",
            ),
            (
                "[1.5.3]",
                "Expecting ',' delimiter: line 1 column 5 (char 4)",
            ),
            (
                "[0x10]",
                "Expecting ',' delimiter: line 1 column 3 (char 2)",
            ),
            ("[-01]", "Expecting ',' delimiter: line 1 column 4 (char 3)"),
            ("tru", "Expecting value: line 1 column 1 (char 0)"),
            ("True", "Expecting value: line 1 column 1 (char 0)"),
            ("[nul]", "Expecting value: line 1 column 2 (char 1)"),
            ("nulls", "Extra data: line 1 column 5 (char 4)"),
            ("[1]]", "Extra data: line 1 column 4 (char 3)"),
            ("x", "Expecting value: line 1 column 1 (char 0)"),
            ("-Inf", "Expecting value: line 1 column 1 (char 0)"),
            ("-NaN", "Expecting value: line 1 column 1 (char 0)"),
            (
                "NaN",
                "Out of range float values are not JSON compliant: 'NaN'",
            ),
            (
                "[Infinity]",
                "Out of range float values are not JSON compliant: 'Infinity'",
            ),
            (
                "[-Infinity]",
                "Out of range float values are not JSON compliant: '-Infinity'",
            ),
            (
                "\u{feff}{}",
                "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)",
            ),
            // Positions count characters, not bytes.
            (
                "{\"я\":1 x",
                "Expecting ',' delimiter: line 1 column 8 (char 7)",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(err(body), *want, "body {body:?}");
        }
    }

    #[test]
    fn integer_digit_limit_matches_python() {
        let ok = "1".repeat(INT_DIGITS_MAX);
        assert_eq!(top(&ok), Value::Int(ok.clone()));
        let want = "Exceeds the limit (4300 digits) for integer string conversion: value has \
                    4301 digits; use sys.set_int_max_str_digits() to increase the limit";
        assert_eq!(err(&"1".repeat(4301)), want);
        assert_eq!(err(&format!("-{}", "1".repeat(4301))), want);
        // A float literal has no such limit; it overflows to inf.
        assert_eq!(
            top(&format!("{}.0", "1".repeat(4301))),
            Value::Float(f64::INFINITY)
        );
    }

    #[test]
    fn utf8_errors_match_python_codec() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"\xff",
                "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte",
            ),
            (
                b"{\"a\":\"\xe2\x28\"}",
                "'utf-8' codec can't decode byte 0xe2 in position 6: invalid continuation byte",
            ),
            (
                b"{\"a\":\"\xf0\x90\x28\"}",
                "'utf-8' codec can't decode bytes in position 6-7: invalid continuation byte",
            ),
            (
                b"{\"a\":\"\xed\xa0\x80\"}",
                "'utf-8' codec can't decode byte 0xed in position 6: invalid continuation byte",
            ),
            (
                b"{\"a\":\"\xc0\xaf\"}",
                "'utf-8' codec can't decode byte 0xc0 in position 6: invalid start byte",
            ),
            (
                b"{\"a\":\"\x80\"}",
                "'utf-8' codec can't decode byte 0x80 in position 6: invalid start byte",
            ),
            (
                b"{\"a\":\"\xe2",
                "Unterminated string starting at: line 1 column 6 (char 5)",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(parse(body, &[]), Err((*want).to_owned()), "body {body:?}");
        }
        // A truncated sequence at the very end is dropped, not refused.
        assert_eq!(parse(b"{}\xe2\x82", &[]), Ok(Document::Object(vec![])));
    }

    #[test]
    fn values_follow_pythons_model() {
        assert_eq!(top("null"), Value::Null);
        assert_eq!(top(" true "), Value::Bool(true));
        assert_eq!(top("false"), Value::Bool(false));
        assert_eq!(top("-0"), Value::Int("0".into()));
        assert_eq!(
            top("12345678901234567890123"),
            Value::Int("12345678901234567890123".into())
        );
        assert_eq!(top("1E+2"), Value::Float(100.0));
        assert_eq!(top("1e-0"), Value::Float(1.0));
        assert_eq!(top("-0.0"), Value::Float(-0.0));
        assert_eq!(top("1e999"), Value::Float(f64::INFINITY));
        assert_eq!(top("[1, [2, {\"a\": 3}]]"), Value::List);
        let s = |text: &str, lone: Option<u16>| {
            Value::Str(JsonStr {
                text: text.into(),
                first_lone_surrogate: lone,
            })
        };
        assert_eq!(
            top(r#""\/\b\f\n\r\t\"\\""#),
            s("/\u{8}\u{c}\n\r\t\"\\", None)
        );
        assert_eq!(top(r#""\u0041""#), s("A", None));
        assert_eq!(top(r#""\ud83d\ude00""#), s("😀", None));
        assert_eq!(top(r#""\uD83D\uDE00""#), s("😀", None));
        assert_eq!(top(r#""\ud800\u0041""#), s("\u{fffd}A", Some(0xd800)));
        assert_eq!(
            top(r#""\ud800\ud800""#),
            s("\u{fffd}\u{fffd}", Some(0xd800))
        );
        assert_eq!(
            top(r#""x\udc00\ud800y""#),
            s("x\u{fffd}\u{fffd}y", Some(0xdc00))
        );
        assert_eq!(top("\"\u{7f}я😀\""), s("\u{7f}я😀", None));
    }

    #[test]
    fn object_members_last_duplicate_wins_and_escaped_keys_match() {
        let body = r#"{"a": 1, "ph\u006fne": "x", "a": [1], "b": {"a": 2}}"#;
        match parse(body.as_bytes(), &["a", "phone", "c"]) {
            Ok(Document::Object(m)) => {
                assert_eq!(m[0], Some(Value::List));
                assert!(matches!(&m[1], Some(Value::Str(s)) if s.text == "x"));
                assert_eq!(m[2], None);
            }
            other => panic!("{other:?}"),
        }
        // Nested keys with a wanted name are not top-level members.
        assert_eq!(member(r#"{"b": {"a": 2}}"#, "a"), None);
        assert_eq!(member(r#"{"a": {"a": 2}}"#, "a"), Some(Value::Dict));
        assert_eq!(member(r#"{"a": []}"#, "a"), Some(Value::List));
        assert_eq!(member(r#"{"a": 1.5}"#, "a"), Some(Value::Float(1.5)));
    }

    #[test]
    fn nesting_is_capped_without_recursion() {
        let ok = format!(
            "{}{}",
            "[".repeat(JSON_NESTING_DEPTH_MAX),
            "]".repeat(JSON_NESTING_DEPTH_MAX)
        );
        assert_eq!(top(&ok), Value::List);
        let deep = "[".repeat(JSON_NESTING_DEPTH_MAX + 1);
        assert_eq!(
            err(&deep),
            "Nesting deeper than 512 levels: line 1 column 513 (char 512)"
        );
        // Far deeper input fails the same clean way (no stack overflow).
        let very_deep = "[{\"a\":".repeat(200_000);
        assert!(err(&very_deep).starts_with("Nesting deeper than 512 levels"));
    }
}
