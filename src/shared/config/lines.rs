//! The checks of one `[[lines]]` entry and the expansion of its number
//! ranges, for [`super::Config`]'s load and its number list.
//!
//! Not for: reading the file or the other sections (`super`).

use super::{LineConfig, LineMode, RANGE_COUNT_MAX};
use anyhow::{bail, Context, Result};
use dialproof_engine::caller_evidence::CallerIdTrust;
use dialproof_engine::sip::number::Region;
use dialproof_engine::sip::route::CalledFrom;

pub(super) fn check_e164(n: &str, line: &str) -> Result<String> {
    let digits = n.strip_prefix('+').unwrap_or("");
    if digits.len() < 8 || digits.len() > 15 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        bail!("line {line:?}: {n:?} is not an E.164 number (+ and 8 to 15 digits)");
    }
    Ok(n.to_owned())
}

/// Calls `push` with each number of the range, after checking the whole
/// range (nothing is pushed from a range that overflows its width).
pub(super) fn expand_range(
    start: &str,
    count: u64,
    line: &str,
    mut push: impl FnMut(String),
) -> Result<()> {
    let start = check_e164(start, line)?;
    if count == 0 || count > RANGE_COUNT_MAX {
        bail!("line {line:?}: count must be 1..={RANGE_COUNT_MAX}, got {count}");
    }
    let digits = &start[1..];
    let first: u64 = digits.parse().context("range_start digits")?;
    let width = digits.len();
    // The last number is the longest: if it keeps the width, all do.
    if format!("{}", first + (count - 1)).len() > width {
        bail!("line {line:?}: range starting at {start} overflows {width} digits");
    }
    for i in 0..count {
        push(format!("+{:0width$}", first + i));
    }
    Ok(())
}

/// The final responses a line may reject calls with: 603 Decline (the
/// default), 486 Busy Here, 480 Temporarily Unavailable. None of them
/// answers the call, so the caller is never billed.
pub const REJECT_CODES: [u16; 3] = [603, 486, 480];
/// Longest registration expiry a line may ask for.
pub const REGISTER_EXPIRES_SECONDS_MAX: u32 = 86_400;

/// Checks a line's SIP settings at configuration load.
pub fn validate_line(line: &LineConfig) -> Result<()> {
    let name = &line.name;
    if !REJECT_CODES.contains(&line.reject_code) {
        bail!(
            "line {name:?}: reject_code must be one of {REJECT_CODES:?}, got {}",
            line.reject_code
        );
    }
    if Region::parse(&line.default_country).is_none() {
        bail!(
            "line {name:?}: default_country {:?} is not an ISO region with a numbering plan",
            line.default_country
        );
    }
    if CalledFrom::parse(&line.dialled_number_from).is_none() {
        bail!(
            "line {name:?}: dialled_number_from must be one of \"auto\", \"request_uri\", \
             \"to\", \"p_called_party_id\", got {:?}",
            line.dialled_number_from
        );
    }
    if CallerIdTrust::parse_minimum(&line.min_caller_id_trust).is_none() {
        bail!(
            "line {name:?}: min_caller_id_trust must be one of \"unverified\", \"asserted\", \
             \"verified\", got {:?}",
            line.min_caller_id_trust
        );
    }
    if line.register_expires_seconds == 0
        || line.register_expires_seconds > REGISTER_EXPIRES_SECONDS_MAX
    {
        bail!("line {name:?}: register_expires_seconds must be 1..={REGISTER_EXPIRES_SECONDS_MAX}");
    }
    if line.ping_interval_seconds == 0 || line.ping_failures_max == 0 {
        bail!("line {name:?}: ping_interval_seconds and ping_failures_max must be at least 1");
    }
    match line.mode {
        LineMode::AlwaysUp => {}
        LineMode::IpAuth => {
            if line.provider.is_none() {
                bail!("line {name:?}: mode \"ip_auth\" needs `provider` (host:port)");
            }
        }
        LineMode::Register => {
            if line.provider.is_none() || line.username.is_none() || line.password.is_none() {
                bail!(
                    "line {name:?}: mode \"register\" needs `provider`, `username` and `password`"
                );
            }
        }
    }
    if let Some(p) = &line.provider {
        if dialproof_engine::sip::message::split_host_port(p).is_none_or(|(_, port)| port.is_none())
        {
            bail!("line {name:?}: provider must be host:port, got {p:?}");
        }
    }
    Ok(())
}
