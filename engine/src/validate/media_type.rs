//! Which request bodies are parsed as JSON: DRF's parser selection with only
//! `JSONParser` installed, as the original service has it.
//!
//! DRF parses a body only when there is one (an empty body is `{}` whatever
//! its type), and then only when the request's `Content-Type` matches the
//! parser's `application/json`: type and subtype compared without case,
//! parameters (`charset=...`) ignored, a `*` on the request's side matching
//! anything. Otherwise it answers 415 with the raw header value quoted in
//! the Russian text; a missing header counts as the empty string.
//!
//! Not for: the JSON itself ([`super::parse_create`]) or the body-size limit
//! (the HTTP layer).

/// The one media type the API parses.
pub const JSON: (&str, &str) = ("application", "json");

/// DRF's `UnsupportedMediaType` text for `media_type` (the raw header value,
/// `""` when the header is missing), in the `ru` locale.
pub fn unsupported(media_type: &str) -> String {
    format!("Неподдерживаемый тип данных \"{media_type}\" в запросе.")
}

/// `Ok` when a body of `body_len` bytes with this `Content-Type` is parsed
/// as JSON (or not parsed at all, being empty); else the 415 `detail` text.
pub fn check_json(content_type: Option<&str>, body_len: usize) -> Result<(), String> {
    if body_len == 0 {
        return Ok(());
    }
    let raw = content_type.unwrap_or("");
    if matches_json(raw) {
        Ok(())
    } else {
        Err(unsupported(raw))
    }
}

/// DRF `_MediaType(JSON).match(_MediaType(raw))` for a parser media type
/// without parameters.
fn matches_json(raw: &str) -> bool {
    let full = raw
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let (main, sub) = full.split_once('/').unwrap_or((full.as_str(), ""));
    let fits = |ours: &str, theirs: &str| theirs == "*" || theirs == ours;
    fits(JSON.1, sub) && fits(JSON.0, main)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_in_any_case_with_parameters_is_parsed() {
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            " application/json ;charset=latin-1",
            "application/*",
            "*/*",
            "*/json",
        ] {
            assert_eq!(check_json(Some(ct), 2), Ok(()), "{ct}");
        }
    }

    #[test]
    fn other_types_and_a_missing_header_get_415_with_the_raw_value() {
        for ct in [
            "text/plain",
            "text/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/vnd.api+json",
            "application/json-patch+json",
            "application",
            "",
        ] {
            assert_eq!(check_json(Some(ct), 2), Err(unsupported(ct)), "{ct}");
        }
        assert_eq!(
            check_json(None, 2),
            Err("Неподдерживаемый тип данных \"\" в запросе.".to_owned())
        );
        assert_eq!(
            check_json(Some("text/plain; charset=utf-8"), 1),
            Err("Неподдерживаемый тип данных \"text/plain; charset=utf-8\" в запросе.".to_owned())
        );
    }

    #[test]
    fn an_empty_body_is_never_refused() {
        assert_eq!(check_json(Some("text/plain"), 0), Ok(()));
        assert_eq!(check_json(None, 0), Ok(()));
    }
}
