//! Reading `application/x-www-form-urlencoded` bodies and query strings
//! into named fields: the dashboard's edge, where a browser's bytes become
//! strings. Repeated names keep the first value; anything undecodable is
//! replaced, never a panic.
//!
//! Not for: what a field means (each page parses its own fields).

use std::collections::HashMap;

/// Longest value kept for any field; longer ones are cut (every real field
/// is far shorter, and the HTTP layer bounds the body anyway).
const FIELD_CHARS_MAX: usize = 2000;

pub struct Fields(HashMap<String, String>);

impl Fields {
    pub fn parse(bytes: &[u8]) -> Fields {
        let mut map = HashMap::new();
        for (k, v) in url::form_urlencoded::parse(bytes) {
            let v: String = v.chars().take(FIELD_CHARS_MAX).collect();
            map.entry(k.into_owned()).or_insert(v);
        }
        Fields(map)
    }

    pub fn query(query: Option<&str>) -> Fields {
        Fields::parse(query.unwrap_or("").as_bytes())
    }

    /// The field's value, trimmed; `None` when absent or blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// The field as sent (not trimmed), or "" (passwords).
    pub fn raw(&self, name: &str) -> &str {
        self.0.get(name).map(String::as_str).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_decode_and_keep_the_first_value() {
        let f = Fields::parse(b"a=1&b=%D0%BA%D0%BB+x&a=2&c=&d=%ZZ");
        assert_eq!(f.get("a"), Some("1"));
        assert_eq!(f.get("b"), Some("кл x"));
        assert_eq!(f.get("c"), None);
        assert_eq!(f.get("d"), Some("%ZZ"));
        assert_eq!(f.raw("missing"), "");
    }
}
