//! What a webhook URL's text alone decides, worked out once per distinct
//! URL for each sender thread rather than on every attempt.
//!
//! The SSRF precheck (scheme, no embedded credentials, a host), the WHATWG
//! normalisation (`http://0x7f.1/` is `http://127.0.0.1/`, so ureq sees the
//! host the check saw) and the request URI ureq sends to depend on nothing
//! but the URL, and both URL parses run IDNA: at thousands of deliveries a
//! second to one receiver they were a large part of an attempt's cost. A
//! refusal is remembered too (it is as final as the URL).
//!
//! Not for: anything that may change between two attempts to the same URL:
//! the company's development URLs (the sender judges the policy and the
//! scheme rule per attempt, as the company is now) and the addresses the
//! name resolves to (`vetting`, at every connection).

use dialproof_engine::ssrf;
use std::collections::HashMap;
use ureq::http::Uri;

/// Distinct URLs one sender remembers. A webhook URL names a client's
/// receiver, so a service has few; past the bound the map starts over,
/// which costs one parse per URL again, never a wrong answer.
pub const TARGETS_MAX: usize = 256;

/// A URL that passed the precheck.
#[derive(Clone, Debug)]
pub struct Target {
    /// The scheme as the precheck read it (`http` or `https`).
    pub scheme: &'static str,
    /// The normalised URL as ureq's request URI; `Err` is the text of the
    /// failure ureq would report for it (kept so the scheme rule, which
    /// comes first, still decides first).
    pub uri: Result<Uri, String>,
}

/// One sender's memory of the URLs it has sent to.
#[derive(Default)]
pub struct Targets {
    known: HashMap<String, Result<Target, String>>,
}

impl Targets {
    /// The target of `url`, or the attempt's error if the URL itself is
    /// refused.
    pub fn get(&mut self, url: &str) -> Result<Target, String> {
        if let Some(known) = self.known.get(url) {
            return known.clone();
        }
        let prepared = prepare(url);
        if self.known.len() >= TARGETS_MAX {
            self.known.clear();
        }
        self.known.insert(url.to_owned(), prepared.clone());
        prepared
    }
}

/// The checks and the normalisation, exactly as each attempt made them
/// before they were remembered.
fn prepare(url: &str) -> Result<Target, String> {
    let checked = ssrf::precheck(url)?;
    let scheme = if checked.scheme == "https" {
        "https"
    } else {
        // The precheck admits only `http` and `https`.
        "http"
    };
    let normalized = match url::Url::parse(url) {
        Ok(u) => u.to_string(),
        Err(e) => return Err(format!("webhook_url does not parse: {e}")),
    };
    let uri =
        Uri::try_from(normalized.as_str()).map_err(|e| ureq::Error::Http(e.into()).to_string());
    Ok(Target { scheme, uri })
}

#[cfg(test)]
mod tests {
    use super::{Targets, TARGETS_MAX};

    #[test]
    fn a_url_is_checked_and_normalised_once_and_refusals_are_kept() {
        let mut targets = Targets::default();
        let t = targets.get("http://0x7f.1:9000/h?x=1").unwrap();
        assert_eq!(t.scheme, "http");
        assert_eq!(
            t.uri.unwrap().to_string(),
            "http://127.0.0.1:9000/h?x=1",
            "ureq is given the host the check saw"
        );
        let refused = targets.get("ftp://example.com/h").unwrap_err();
        assert!(refused.contains("scheme"), "{refused}");
        assert_eq!(targets.get("ftp://example.com/h").unwrap_err(), refused);
        assert!(targets
            .get("https://user:pw@example.com/h")
            .unwrap_err()
            .contains("credentials"));
        assert_eq!(targets.known.len(), 3);
        for i in 0..TARGETS_MAX + 1 {
            targets.get(&format!("https://h{i}.example/")).unwrap();
        }
        assert!(targets.known.len() <= TARGETS_MAX, "bounded");
    }
}
