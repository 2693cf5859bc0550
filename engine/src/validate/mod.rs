//! Create-request validation: the body of `POST /api/v1/verifications/`,
//! judged and worded exactly as the original DRF service (LANGUAGE_CODE
//! 'ru') judges and words it.
//!
//! [`parse_create`] turns raw body bytes into a typed [`CreateRequest`] or
//! into the error the original would answer:
//! `{"detail": "JSON parse error - ..."}` for a body that is not JSON
//! ([`CreateError::Json`]), or
//! `{"field": ["message", ...]}` for everything else
//! ([`CreateError::Fields`]), all fields reported together in the order
//! phone, webhook_url, client_ref, info, ttl_seconds. The rules per field,
//! in DRF's own order (emptiness, type, then every validator, each failing
//! one adding its message):
//!
//! | field | missing | null / blank | wrong type | checks |
//! |---|---|---|---|---|
//! | phone | required | "may not be blank" | invalid phone | > 32 chars: length message only; else `+` and 8-15 digits, valid per libphonenumber; echoed in E.164 |
//! | webhook_url | required | "may not be blank" | invalid URL | <= 500 chars, no NUL, no lone surrogate, Django URLValidator syntax |
//! | client_ref | `""` | null refused, blank is `""` | "Not a valid string." | <= 120 chars, no NUL, no lone surrogate |
//! | info | `""` | as client_ref | as client_ref | <= 500 chars, as client_ref |
//! | ttl_seconds | 60 | null refused | invalid integer | Python `int()` of the value (`30`, `30.0`, `" 30 "`, `"３０"`), 1..=3600 |
//!
//! Strings count characters as Python does (Unicode scalar values), are
//! trimmed of Python whitespace, and numbers given to string fields are
//! taken in their Python `str()` form (`1e16` is `"1e+16"`). Unknown keys
//! are ignored; of duplicate keys the last wins. An empty body (0 bytes)
//! counts as `{}`; whitespace alone is not JSON (DRF parses any non-empty
//! body).
//!
//! Not for: the SSRF guard on `webhook_url` (DNS lives in the binary; the
//! pure part is [`crate::ssrf`]), authentication, rate limiting, or the
//! HTTP layer's body-size rule. The content-type rule is
//! [`media_type::check_json`].

mod json;
pub mod media_type;
pub mod messages;
mod phone;
mod pytext;
mod url_syntax;

pub use json::JSON_NESTING_DEPTH_MAX;
pub use phone::{warm_up, PHONE_DIGITS_MAX, PHONE_DIGITS_MIN};
pub use url_syntax::URL_CHARS_MAX;

use crate::pool::Pool;
use crate::verification::{effective_ttl_seconds, TTL_SECONDS_DEFAULT};
use json::{Document, Value};

/// Longest `phone` accepted, in characters.
pub const PHONE_CHARS_MAX: usize = 32;
/// Longest `webhook_url` accepted, in characters.
pub const WEBHOOK_URL_CHARS_MAX: usize = 500;
/// Longest `client_ref` accepted, in characters.
pub const CLIENT_REF_CHARS_MAX: usize = 120;
/// Longest `info` accepted, in characters.
pub const INFO_CHARS_MAX: usize = 500;
/// Smallest `ttl_seconds` a request may ask for (the effective TTL is then
/// clamped by [`effective_ttl_seconds`]).
pub const TTL_SECONDS_REQUEST_MIN: u32 = 1;
/// Largest `ttl_seconds` a request may ask for.
pub const TTL_SECONDS_REQUEST_MAX: u32 = 3600;
/// DRF IntegerField refuses longer strings before trying `int()` on them.
pub const INTEGER_STRING_CHARS_MAX: usize = 1000;

/// The body's fields, in the order DRF declares and reports them.
const FIELDS: [&str; 5] = ["phone", "webhook_url", "client_ref", "info", "ttl_seconds"];

/// A valid create request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    /// E.164, as libphonenumber formats it.
    pub phone: String,
    pub pool: Pool,
    /// Trimmed; syntax valid. Not yet checked against the SSRF guard.
    pub webhook_url: String,
    pub client_ref: String,
    pub info: String,
    /// What the client asked for (1..=3600, default 60).
    pub ttl_seconds_requested: u32,
    /// The TTL that applies (clamped into 30..=600).
    pub ttl_seconds: u32,
}

/// The create serializer's fields in declaration order, which is the order
/// DRF reports their errors in.
pub const FIELD_ORDER: [&str; 5] = ["phone", "webhook_url", "client_ref", "info", "ttl_seconds"];

/// Field errors in report order: `(field, messages)`, one entry per field.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldErrors(pub Vec<(String, Vec<String>)>);

impl FieldErrors {
    /// The 400 body, as DRF's JSONRenderer writes it: compact separators,
    /// UTF-8 kept as is (not `\u` escapes), except U+2028 and U+2029, which
    /// DRF escapes so the output stays a JavaScript subset.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, (field, messages)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_json_string(&mut out, field);
            out.push_str(":[");
            for (j, message) in messages.iter().enumerate() {
                if j > 0 {
                    out.push(',');
                }
                push_json_string(&mut out, message);
            }
            out.push(']');
        }
        out.push('}');
        out
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Append `message` to `field`'s list, creating the entry (at the end of
    /// the report order) on first use.
    pub fn add(&mut self, field: &str, message: impl Into<String>) {
        let message = message.into();
        match self.0.iter_mut().find(|(name, _)| name == field) {
            Some((_, messages)) => messages.push(message),
            None => self.0.push((field.to_owned(), vec![message])),
        }
    }

    /// Like [`FieldErrors::add`], but a new entry goes where DRF would report
    /// it: in the serializer's field declaration order ([`FIELD_ORDER`]).
    /// Used when a check that runs after parsing (the SSRF guard) adds an
    /// error to a report that already holds later fields.
    pub fn add_in_field_order(&mut self, field: &str, message: impl Into<String>) {
        let rank = |f: &str| {
            FIELD_ORDER
                .iter()
                .position(|x| *x == f)
                .unwrap_or(usize::MAX)
        };
        if self.0.iter().any(|(name, _)| name == field) {
            return self.add(field, message);
        }
        let at = self
            .0
            .iter()
            .position(|(name, _)| rank(name) > rank(field))
            .unwrap_or(self.0.len());
        self.0.insert(at, (field.to_owned(), vec![message.into()]));
    }

    /// The messages recorded for `field`, if any.
    pub fn get(&self, field: &str) -> Option<&[String]> {
        self.0
            .iter()
            .find(|(name, _)| name == field)
            .map(|(_, messages)| messages.as_slice())
    }
}

fn push_json_string(out: &mut String, s: &str) {
    // serde_json escapes exactly what Python's json.dumps(ensure_ascii=False)
    // escapes: quote, backslash and control characters.
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""));
    out.push_str(
        &quoted
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029"),
    );
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateError {
    /// The body is not JSON: the full `detail` text, `JSON parse error - ...`.
    Json(String),
    /// The body is JSON but not a valid request.
    Fields {
        errors: FieldErrors,
        /// The URL, when its own field checks passed (DRF still runs the
        /// SSRF guard on it and reports its message with the others), so
        /// the caller never parses the body a second time.
        webhook_url: Option<String>,
    },
}

/// The wanted members of a create body, in [`FIELDS`] order: an empty
/// body is `{}` (DRF parses nothing), a body that is not JSON or not an
/// object is the error DRF gives for it.
fn create_members(body: &[u8]) -> Result<Vec<Option<Value>>, CreateError> {
    if body.is_empty() {
        return Ok(vec![None; FIELDS.len()]);
    }
    match json::parse(body, &FIELDS) {
        Err(message) => Err(CreateError::Json(format!(
            "{}{message}",
            messages::JSON_PARSE_ERROR_PREFIX
        ))),
        Ok(Document::NotObject(value)) => {
            let message = match value {
                Value::Null => messages::NO_DATA.to_owned(),
                other => messages::not_a_dictionary(other.python_type_name()),
            };
            let mut errors = FieldErrors::default();
            errors.add(messages::NON_FIELD_ERRORS, message);
            Err(CreateError::Fields {
                errors,
                webhook_url: None,
            })
        }
        Ok(Document::Object(members)) => Ok(members),
    }
}

/// Validate a create-request body. See the module doc for every rule.
pub fn parse_create(body: &[u8]) -> Result<CreateRequest, CreateError> {
    let members = create_members(body)?;
    let field = |i: usize| members.get(i).and_then(Option::as_ref);
    let phone = phone_field(field(0));
    let webhook_url = webhook_url_field(field(1));
    let client_ref = optional_text_field(field(2), CLIENT_REF_CHARS_MAX);
    let info = optional_text_field(field(3), INFO_CHARS_MAX);
    let ttl = ttl_field(field(4));
    match (phone, webhook_url, client_ref, info, ttl) {
        (Ok(phone), Ok(webhook_url), Ok(client_ref), Ok(info), Ok(ttl_seconds_requested)) => {
            Ok(CreateRequest {
                pool: Pool::for_phone(&phone),
                phone,
                webhook_url,
                client_ref,
                info,
                ttl_seconds_requested,
                ttl_seconds: effective_ttl_seconds(ttl_seconds_requested),
            })
        }
        (phone, webhook_url, client_ref, info, ttl) => {
            let checked_url = webhook_url.as_ref().ok().cloned();
            let failures = [
                phone.err(),
                webhook_url.err(),
                client_ref.err(),
                info.err(),
                ttl.err(),
            ];
            let mut errors = FieldErrors::default();
            for (name, failed) in FIELDS.iter().zip(failures) {
                for message in failed.into_iter().flatten() {
                    errors.add(name, message);
                }
            }
            Err(CreateError::Fields {
                errors,
                webhook_url: checked_url,
            })
        }
    }
}

/// A value as DRF's CharField sees it once emptiness and type are settled.
enum CharInput {
    Missing,
    /// `""` or only whitespace.
    Blank,
    Null,
    /// bool, list or object.
    NotAString,
    /// `str(value).strip()`, and the first lone surrogate if there was one.
    Text(String, Option<u16>),
}

fn char_input(value: Option<&Value>) -> CharInput {
    match value {
        None => CharInput::Missing,
        Some(Value::Null) => CharInput::Null,
        Some(Value::Bool(_) | Value::List | Value::Dict) => CharInput::NotAString,
        Some(Value::Str(s)) => {
            let text = pytext::strip(&s.text);
            if text.is_empty() {
                CharInput::Blank
            } else {
                CharInput::Text(text.to_owned(), s.first_lone_surrogate)
            }
        }
        // DRF's CharField is lenient with numbers: it takes `str(value)`.
        Some(Value::Int(digits)) => CharInput::Text(digits.clone(), None),
        Some(Value::Float(x)) => CharInput::Text(pytext::float_repr(*x), None),
    }
}

/// The validators every DRF CharField carries: its max_length, then
/// ProhibitNullCharacters and ProhibitSurrogateCharacters. All run; each
/// failure adds its message.
fn char_validators(text: &str, lone_surrogate: Option<u16>, chars_max: usize) -> Vec<String> {
    let mut failures = Vec::new();
    if pytext::char_len(text) > chars_max {
        failures.push(messages::max_length(chars_max));
    }
    if text.contains('\0') {
        failures.push(messages::NULL_CHARACTERS.to_owned());
    }
    if let Some(unit) = lone_surrogate {
        failures.push(messages::surrogate_characters(unit));
    }
    failures
}

/// phone: one normalized message for every malformed value (the spec hides
/// parser details), except the specific over-length message.
fn phone_field(value: Option<&Value>) -> Result<String, Vec<String>> {
    match char_input(value) {
        CharInput::Missing => Err(vec![messages::REQUIRED.to_owned()]),
        CharInput::Blank | CharInput::Null => Err(vec![messages::BLANK.to_owned()]),
        CharInput::NotAString => Err(vec![messages::INVALID_PHONE.to_owned()]),
        CharInput::Text(text, _) => {
            if pytext::char_len(&text) > PHONE_CHARS_MAX {
                return Err(vec![messages::max_length(PHONE_CHARS_MAX)]);
            }
            phone::normalize(&text).ok_or_else(|| vec![messages::INVALID_PHONE.to_owned()])
        }
    }
}

fn webhook_url_field(value: Option<&Value>) -> Result<String, Vec<String>> {
    match char_input(value) {
        CharInput::Missing => Err(vec![messages::REQUIRED.to_owned()]),
        CharInput::Blank | CharInput::Null => Err(vec![messages::BLANK.to_owned()]),
        // URLField overrides CharField's 'invalid' text with its own.
        CharInput::NotAString => Err(vec![messages::INVALID_URL.to_owned()]),
        CharInput::Text(text, lone) => {
            let mut failures = char_validators(&text, lone, WEBHOOK_URL_CHARS_MAX);
            if !url_syntax::is_valid_url(&text) {
                failures.push(messages::INVALID_URL.to_owned());
            }
            if failures.is_empty() {
                Ok(text)
            } else {
                Err(failures)
            }
        }
    }
}

/// client_ref and info: optional strings that may be blank, never null.
fn optional_text_field(value: Option<&Value>, chars_max: usize) -> Result<String, Vec<String>> {
    match char_input(value) {
        CharInput::Missing | CharInput::Blank => Ok(String::new()),
        CharInput::Null => Err(vec![messages::NULL.to_owned()]),
        CharInput::NotAString => Err(vec![messages::NOT_A_STRING.to_owned()]),
        CharInput::Text(text, lone) => {
            let failures = char_validators(&text, lone, chars_max);
            if failures.is_empty() {
                Ok(text)
            } else {
                Err(failures)
            }
        }
    }
}

/// ttl_seconds: DRF IntegerField, `int(re.sub(r'\.0*\s*$', '', str(v)))`,
/// then max_value and min_value.
fn ttl_field(value: Option<&Value>) -> Result<u32, Vec<String>> {
    let invalid = || vec![messages::INVALID_INTEGER.to_owned()];
    let parsed = match value {
        None => return Ok(TTL_SECONDS_DEFAULT),
        Some(Value::Null) => return Err(vec![messages::NULL.to_owned()]),
        Some(Value::Str(s)) => {
            if pytext::char_len(&s.text) > INTEGER_STRING_CHARS_MAX {
                return Err(vec![messages::INTEGER_STRING_TOO_LONG.to_owned()]);
            }
            pytext::int_from_str(pytext::strip_zero_fraction(&s.text))
        }
        Some(Value::Int(digits)) => pytext::int_from_str(digits),
        Some(Value::Float(x)) => {
            pytext::int_from_str(pytext::strip_zero_fraction(&pytext::float_repr(*x)))
        }
        // str(True) is "True", str([..]) is "[..]": int() refuses them all.
        Some(Value::Bool(_) | Value::List | Value::Dict) => None,
    };
    let seconds = parsed.ok_or_else(invalid)?;
    let min = i64::from(TTL_SECONDS_REQUEST_MIN);
    let max = i64::from(TTL_SECONDS_REQUEST_MAX);
    if seconds > max {
        return Err(vec![messages::max_value(max)]);
    }
    if seconds < min {
        return Err(vec![messages::min_value(min)]);
    }
    u32::try_from(seconds).map_err(|_| invalid())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod field_order_tests {
    use super::*;

    #[test]
    fn late_errors_are_inserted_in_declaration_order() {
        let mut e = FieldErrors::default();
        e.add("phone", "p");
        e.add("ttl_seconds", "t");
        e.add_in_field_order("webhook_url", "w");
        let fields: Vec<&str> = e.0.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["phone", "webhook_url", "ttl_seconds"]);
        e.add_in_field_order("webhook_url", "w2");
        assert_eq!(
            e.get("webhook_url"),
            Some(&["w".to_owned(), "w2".to_owned()][..])
        );
        let mut only_late = FieldErrors::default();
        only_late.add("info", "i");
        only_late.add_in_field_order("phone", "p");
        assert_eq!(only_late.0[0].0, "phone");
    }
}
