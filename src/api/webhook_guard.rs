//! The SSRF guard on `webhook_url` at creation: syntax and scheme checks from
//! the engine, then DNS, then every resolved address against the blocked
//! ranges. A company's development URLs (an operator setting) skip the
//! address check, so a developer can point webhooks at a local receiver.
//!
//! Not for: the range tables (`dialproof_engine::ssrf`) or the check at
//! delivery time (the webhook sender repeats it).

use crate::app::App;
use dialproof_engine::ssrf::{self, Host};
use dialproof_storage::CompanyRow;

/// `Ok` if the URL may receive webhooks, else the spec's English message.
pub fn check(app: &App, company: Option<&CompanyRow>, url: &str) -> Result<(), String> {
    let target = ssrf::precheck(url)?;
    if let Some(c) = company {
        if c.dev_webhook_urls.iter().any(|dev| is_dev_url(dev, url)) {
            return Ok(());
        }
    }
    let addresses = match &target.host {
        Host::Ip(ip) => vec![*ip],
        Host::Domain(name) => app
            .resolver
            .resolve(name, target.port)
            .map_err(|e| ssrf::unresolvable_message(&e.to_string()))?,
    };
    for ip in addresses {
        if ssrf::blocked_range(ip).is_some() {
            return Err(ssrf::private_address_message(ip));
        }
    }
    Ok(())
}

/// A development URL entry matches the URL itself or anything below it
/// (`http://localhost:9000/hooks` covers `http://localhost:9000/hooks/a`),
/// never a mere string prefix of the host (`http://localhost:90` does not
/// cover `http://localhost:9000/`).
pub fn is_dev_url(dev: &str, url: &str) -> bool {
    if dev.is_empty() {
        return false;
    }
    match url.strip_prefix(dev) {
        Some("") => true,
        Some(rest) => dev.ends_with('/') || rest.starts_with(['/', '?', '#']),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_dev_url;

    #[test]
    fn dev_urls_match_by_path_boundary() {
        assert!(is_dev_url(
            "http://localhost:9000",
            "http://localhost:9000/x"
        ));
        assert!(is_dev_url(
            "http://localhost:9000/",
            "http://localhost:9000/x"
        ));
        assert!(is_dev_url(
            "http://localhost:9000/h",
            "http://localhost:9000/h"
        ));
        assert!(!is_dev_url("http://localhost:90", "http://localhost:9000/"));
        assert!(!is_dev_url(
            "http://localhost:9000/h",
            "http://localhost:9000/hx"
        ));
        assert!(!is_dev_url("", "http://localhost/"));
    }
}
