//! The configuration's test-mode parts: how long test rows are kept
//! (`[api] test_mode_retention_days`), the region a simulated call's caller
//! ID is read in, and the rule that no configured live number lies in the
//! test range (`dialproof_engine::test_pool`).
//!
//! Not for: the test pools' sizes (a per-company setting in the database,
//! `dialproof company test-pool-size`).

use super::{ApiConfig, Config};
use anyhow::{bail, Result};
use dialproof_engine::pool::Pool;
use dialproof_engine::sip::number::Region;
use dialproof_engine::test_pool;

/// Days a test-mode row is kept after its creation, unless configured.
pub const TEST_MODE_RETENTION_DAYS_DEFAULT: u32 = 7;
/// The accepted range of `test_mode_retention_days`.
pub const TEST_MODE_RETENTION_DAYS_MIN: u32 = 1;
pub const TEST_MODE_RETENTION_DAYS_MAX: u32 = 365;

impl ApiConfig {
    pub fn test_mode_retention_days(&self) -> u32 {
        self.test_mode_retention_days
            .unwrap_or(TEST_MODE_RETENTION_DAYS_DEFAULT)
    }

    pub(super) fn validate_test_mode(&self) -> Result<()> {
        let (min, max) = (TEST_MODE_RETENTION_DAYS_MIN, TEST_MODE_RETENTION_DAYS_MAX);
        if let Some(d) = self.test_mode_retention_days {
            if !(min..=max).contains(&d) {
                bail!("api.test_mode_retention_days must be {min}..={max}, got {d}");
            }
        }
        Ok(())
    }
}

/// Per pool kind (`Pool::index`), the region a line of that kind reads a
/// caller ID in: the `default_country` of the first line with a number of
/// the kind, else Russia (the domestic pool's country).
pub fn test_regions(config: &Config) -> [Region; 2] {
    // "RU" is a region libphonenumber knows; the fallback cannot fail.
    let russia = Region::parse("RU").expect("RU is a known region");
    Pool::ALL.map(|pool| {
        config
            .lines
            .iter()
            .find(|l| l.numbers.iter().any(|n| Pool::parse(&n.pool) == Some(pool)))
            .and_then(|l| Region::parse(&l.default_country))
            .unwrap_or(russia)
    })
}

/// A configured number in the test range would be a live number a test
/// key's pool could also hand out: refused. (A malformed numbers entry is
/// its own problem, reported by the line's check; this looks at the rest.)
pub(super) fn check_numbers(config: &Config) -> Result<()> {
    let mut found = None;
    let _ = config.each_number(|n| {
        if found.is_none() && test_pool::in_test_range(&n.number) {
            found = Some(n.number);
        }
    });
    match found {
        Some(number) => bail!(
            "number {number} is in test mode's reserved range (+72 and nine digits); \
             live numbers must not use it"
        ),
        None => Ok(()),
    }
}
