//! The `Idempotency-Key` request header, parsed at the edge into a typed
//! key or a refusal that names what is wrong with it.
//!
//! A key is 1 to [`KEY_LEN_MAX`] visible ASCII characters (0x21-0x7E), sent
//! once. The IETF httpapi draft "The Idempotency-Key HTTP Header Field"
//! defines the field as a Structured Field string (RFC 8941 section 3.3.3),
//! so a value in double quotes names the key that is its unquoted content
//! (`"abc"` and `abc` are the same key); `\"` and `\\` are its only escapes.
//! Most clients send the bare token, which is accepted as it is.
//!
//! Not for: what a key means for a request (see [`super::table`]), or where
//! header values come from (the binary's HTTP layer hands them over, already
//! trimmed of surrounding whitespace as HTTP allows).

use std::fmt;

/// The longest key, in characters (the draft leaves the length to the
/// server; Stripe's limit is the same).
pub const KEY_LEN_MAX: usize = 255;

/// The header's name, as error bodies and logs spell it.
pub const HEADER: &str = "Idempotency-Key";

/// A valid key: 1..=255 characters, each 0x21-0x7E.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A key already checked once (read back from storage): checked again,
    /// so nothing unchecked ever becomes a key.
    pub fn from_stored(s: &str) -> Option<IdempotencyKey> {
        check_content(s.as_bytes()).ok()
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a header value is not a key. Each has the message the 400 names the
/// header with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The header was sent more than once (two values for one request).
    Repeated,
    Empty,
    TooLong,
    /// A byte outside 0x21-0x7E (a space, a control, anything non-ASCII).
    InvalidCharacter,
    /// Starts with a double quote but is not one well-formed quoted string.
    MalformedQuotedString,
}

impl KeyError {
    /// The message in the 400's `fields.Idempotency-Key` list.
    pub fn message(self) -> &'static str {
        match self {
            KeyError::Repeated => "Idempotency-Key must be sent once.",
            KeyError::Empty => "Idempotency-Key must not be empty.",
            KeyError::TooLong => "Idempotency-Key must be at most 255 characters.",
            KeyError::InvalidCharacter => {
                "Idempotency-Key may contain only visible ASCII characters (0x21 to 0x7E)."
            }
            KeyError::MalformedQuotedString => {
                "Idempotency-Key in double quotes must be one well-formed quoted string."
            }
        }
    }
}

/// The key in a request's `Idempotency-Key` values: `Ok(None)` when the
/// header is absent, an error when it is repeated or malformed.
pub fn parse_header(values: &[&str]) -> Result<Option<IdempotencyKey>, KeyError> {
    match values {
        [] => Ok(None),
        [value] => parse_value(value).map(Some),
        _ => Err(KeyError::Repeated),
    }
}

/// One header value as a key.
pub fn parse_value(value: &str) -> Result<IdempotencyKey, KeyError> {
    let bytes = value.as_bytes();
    if bytes.first() == Some(&b'"') {
        let content = unquote(bytes)?;
        return check_content(&content);
    }
    check_content(bytes)
}

/// The content of an RFC 8941 sf-string: `"` then characters 0x20-0x7E
/// with `"` and `\` escaped by `\`, then `"` and nothing after it.
fn unquote(bytes: &[u8]) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes.iter().skip(1);
    loop {
        match rest.next() {
            None => return Err(KeyError::MalformedQuotedString),
            Some(b'"') => break,
            Some(b'\\') => match rest.next() {
                Some(&c) if c == b'"' || c == b'\\' => out.push(c),
                _ => return Err(KeyError::MalformedQuotedString),
            },
            Some(&c) if (0x20..=0x7e).contains(&c) => out.push(c),
            Some(_) => return Err(KeyError::InvalidCharacter),
        }
    }
    if rest.next().is_some() {
        return Err(KeyError::MalformedQuotedString);
    }
    Ok(out)
}

fn check_content(bytes: &[u8]) -> Result<IdempotencyKey, KeyError> {
    if bytes.is_empty() {
        return Err(KeyError::Empty);
    }
    if !bytes.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Err(KeyError::InvalidCharacter);
    }
    if bytes.len() > KEY_LEN_MAX {
        return Err(KeyError::TooLong);
    }
    // Every byte is ASCII (checked just above), so this is valid UTF-8.
    let text = std::str::from_utf8(bytes).map_err(|_| KeyError::InvalidCharacter)?;
    Ok(IdempotencyKey(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> String {
        parse_value(s).unwrap().as_str().to_owned()
    }

    #[test]
    fn bare_and_quoted_forms_name_the_same_key() {
        assert_eq!(key("order-42"), "order-42");
        assert_eq!(key("\"order-42\""), "order-42");
        assert_eq!(key(r#""a\"b\\c""#), r#"a"b\c"#);
        // A quote inside a bare token is just a character.
        assert_eq!(key("a\"b"), "a\"b");
        assert_eq!(key(&"x".repeat(255)), "x".repeat(255));
    }

    #[test]
    fn every_malformed_value_has_its_own_error() {
        let cases: &[(&str, KeyError)] = &[
            ("", KeyError::Empty),
            ("\"\"", KeyError::Empty),
            ("a b", KeyError::InvalidCharacter),
            ("\"a b\"", KeyError::InvalidCharacter),
            ("tab\there", KeyError::InvalidCharacter),
            ("ключ", KeyError::InvalidCharacter),
            ("a\u{7f}", KeyError::InvalidCharacter),
            ("\"abc", KeyError::MalformedQuotedString),
            ("\"abc\"x", KeyError::MalformedQuotedString),
            ("\"a\\x\"", KeyError::MalformedQuotedString),
            ("\"a\u{1}\"", KeyError::InvalidCharacter),
        ];
        for (value, want) in cases {
            assert_eq!(parse_value(value), Err(*want), "{value:?}");
        }
        assert_eq!(parse_value(&"x".repeat(256)), Err(KeyError::TooLong));
        assert_eq!(
            parse_value(&format!("\"{}\"", "x".repeat(256))),
            Err(KeyError::TooLong)
        );
    }

    #[test]
    fn the_header_is_optional_but_never_repeated() {
        assert_eq!(parse_header(&[]), Ok(None));
        assert_eq!(parse_header(&["k"]).unwrap().unwrap().as_str(), "k");
        assert_eq!(parse_header(&["k", "k"]), Err(KeyError::Repeated));
    }

    #[test]
    fn stored_keys_are_checked_again() {
        assert!(IdempotencyKey::from_stored("ok").is_some());
        assert!(IdempotencyKey::from_stored("not ok").is_none());
    }
}
