//! The SSRF guard on `webhook_url` at creation: syntax and scheme checks from
//! the engine, then DNS, then every resolved address against the blocked
//! ranges. A company's development URLs (an operator setting) skip the
//! address check, so a developer can point webhooks at a local receiver.
//!
//! Not for: the range tables (`dialproof_engine::ssrf`), which URLs are
//! development URLs (`dialproof_engine::dev_urls`) or the check at delivery
//! time (the webhook sender repeats it).

use super::Api;
use dialproof_engine::dev_urls::Policy;
use dialproof_engine::ssrf::{self, Host};
use dialproof_storage::CompanyRow;

/// `Ok` if the URL may receive webhooks, else the spec's English message.
pub fn check(ctx: &Api, company: Option<&CompanyRow>, url: &str) -> Result<(), String> {
    let target = ssrf::precheck(url)?;
    let policy = company.map_or(Policy::Strict, |c| {
        Policy::for_url(&c.dev_webhook_urls, url)
    });
    if !policy.checks_addresses() {
        return Ok(());
    }
    let addresses = match &target.host {
        Host::Ip(ip) => vec![*ip],
        Host::Domain(name) => ctx
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
