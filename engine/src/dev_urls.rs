//! The development-URL rule: which webhook URLs of a company skip the SSRF
//! address check and may use plain `http`.
//!
//! An operator marks URL prefixes of a company as development URLs
//! (`company dev-urls`), so a developer can point webhooks at a receiver on
//! loopback or a private network. Every other webhook URL must be `https`
//! (spec: "an http URL is used only when it is explicitly marked as a
//! development URL") and every address its host resolves to must be public.
//! The rule is judged twice with the company's list as it is at that
//! moment: at creation (the API's SSRF guard) and at each delivery attempt
//! (the sender), so removing a development URL stops plain-http and
//! private deliveries at once.
//!
//! Not for: the blocked address ranges and URL prechecks ([`crate::ssrf`]),
//! resolving names or connecting (the binary), or storing the list (the
//! storage crate trims and bounds it).

/// How a webhook URL is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// `https` only, and every resolved address must be public.
    Strict,
    /// One of the company's development URLs: `http` allowed, any address.
    Development,
}

impl Policy {
    /// The policy for `url` given the company's development URL entries.
    pub fn for_url<S: AsRef<str>>(dev_urls: &[S], url: &str) -> Policy {
        if dev_urls.iter().any(|dev| matches(dev.as_ref(), url)) {
            Policy::Development
        } else {
            Policy::Strict
        }
    }

    /// Whether resolved addresses are checked against the blocked ranges.
    pub fn checks_addresses(self) -> bool {
        self == Policy::Strict
    }

    /// `Ok` if a delivery may use `scheme` (`http` or `https`, as
    /// [`crate::ssrf::precheck`] read it) under this policy; else the
    /// attempt's error for the delivery log.
    pub fn check_scheme(self, scheme: &str, url: &str) -> Result<(), String> {
        if scheme == "https" || self == Policy::Development {
            return Ok(());
        }
        Err(format!(
            "webhook_url must use https; http is allowed only for a development URL (got {url})"
        ))
    }
}

/// A development URL entry matches the URL itself or anything below it
/// (`http://localhost:9000/hooks` covers `http://localhost:9000/hooks/a`),
/// never a mere string prefix of the host (`http://localhost:90` does not
/// cover `http://localhost:9000/`) or of a path segment (`/h` does not
/// cover `/hx`). The comparison is of the texts as written, so an entry
/// must be spelled as the URLs it is meant to cover; an empty entry covers
/// nothing.
pub fn matches(dev: &str, url: &str) -> bool {
    if dev.is_empty() {
        return false;
    }
    match url.strip_prefix(dev) {
        Some("") => true,
        // After the entry, the URL must go on at a boundary: a path, a
        // query or a fragment (or the entry itself ended with `/`).
        Some(rest) => dev.ends_with('/') || rest.starts_with(['/', '?', '#']),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_match_by_path_boundary() {
        assert!(matches("http://localhost:9000", "http://localhost:9000/x"));
        assert!(matches("http://localhost:9000/", "http://localhost:9000/x"));
        assert!(matches(
            "http://localhost:9000/h",
            "http://localhost:9000/h"
        ));
        assert!(matches(
            "http://localhost:9000/h",
            "http://localhost:9000/h/deeper"
        ));
        assert!(matches(
            "http://localhost:9000/h",
            "http://localhost:9000/h?a=1"
        ));
        assert!(matches(
            "http://localhost:9000/h",
            "http://localhost:9000/h#f"
        ));
        assert!(!matches("http://localhost:90", "http://localhost:9000/"));
        assert!(!matches(
            "http://localhost:9000/h",
            "http://localhost:9000/hx"
        ));
        assert!(!matches(
            "http://localhost:9000/h/",
            "http://localhost:9000/h"
        ));
        assert!(!matches("", "http://localhost/"));
    }

    #[test]
    fn a_host_prefix_is_not_a_development_host() {
        // `localhost.evil.example` must not ride on an entry for `localhost`.
        assert!(!matches(
            "http://localhost",
            "http://localhost.evil.example/"
        ));
        assert!(!matches("http://10.0.0.1", "http://10.0.0.10/"));
        // Nor credentials smuggled after the entry's host.
        assert!(!matches(
            "http://localhost",
            "http://localhost@evil.example/"
        ));
        assert!(!matches(
            "http://localhost",
            "http://localhost:1@evil.example/"
        ));
    }

    #[test]
    fn the_comparison_is_of_the_written_text() {
        assert!(!matches("http://LOCALHOST:9000", "http://localhost:9000/x"));
        assert!(!matches(
            "http://localhost:9000",
            "https://localhost:9000/x"
        ));
    }

    #[test]
    fn policy_follows_the_company_list() {
        let list = ["http://127.0.0.1:9000", "http://dev.internal/hooks"];
        assert_eq!(
            Policy::for_url(&list, "http://127.0.0.1:9000/h"),
            Policy::Development
        );
        assert_eq!(
            Policy::for_url(&list, "http://dev.internal/hooks/a"),
            Policy::Development
        );
        assert_eq!(
            Policy::for_url(&list, "http://dev.internal/other"),
            Policy::Strict
        );
        let none: [&str; 0] = [];
        assert_eq!(
            Policy::for_url(&none, "http://127.0.0.1:9000/h"),
            Policy::Strict
        );
        let owned = vec![String::from("http://127.0.0.1:9000")];
        assert_eq!(
            Policy::for_url(&owned, "http://127.0.0.1:9000/"),
            Policy::Development
        );
    }

    #[test]
    fn only_development_urls_skip_the_address_check_and_may_use_http() {
        assert!(Policy::Strict.checks_addresses());
        assert!(!Policy::Development.checks_addresses());
        assert!(Policy::Strict
            .check_scheme("https", "https://a.example/")
            .is_ok());
        assert!(Policy::Development
            .check_scheme("https", "https://a.example/")
            .is_ok());
        assert!(Policy::Development
            .check_scheme("http", "http://127.0.0.1/")
            .is_ok());
        let refused = Policy::Strict
            .check_scheme("http", "http://a.example/")
            .unwrap_err();
        assert!(refused.contains("must use https"), "{refused}");
        assert!(refused.contains("http://a.example/"), "{refused}");
    }
}
