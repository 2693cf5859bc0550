//! Test mode's dial numbers: which numbers the test pools hold, the magic
//! phone, and the lease bookkeeping of the pools ([`TestPools`]).
//!
//! # The range, and why no subscriber can hold it
//!
//! Every test number is `+7 2KC CCCC NNN` (E.164 `+72KCCCCCNNN`, eleven
//! digits like every Russian number): `2` is the first digit of the
//! national code, `K` the pool kind (`0` domestic, `1` international),
//! `CCCCC` the company id (zero-padded, so every company has numbers of its
//! own and one company's tests can never exhaust another's) and `NNN` the
//! number's index in that company's pool. Zone +7's national plan (shared
//! by Russia and Kazakhstan) keeps every code starting with `2` in the
//! common reserve: none is assigned to a network, so no subscriber holds a
//! `+7 2xx` number and a call can never reach one. The strings still have
//! the shape of E.164 (`+`, a country code, ten national digits), so a
//! client's screens and validators that check the shape show them like a
//! live dial number. libphonenumber, which knows the assigned ranges, calls
//! them invalid, which is the point: they are not real numbers.
//!
//! They are also never configured live numbers: the SIP side never knows
//! them (an INVITE naming one finds no line's number), and the service
//! refuses a configuration that lists one.
//!
//! # The magic phone
//!
//! A test create for [`MAGIC_NO_NUMBER_PHONE`] is answered 503
//! `no_dial_number_available`, as if the pool were exhausted. A `phone`
//! goes through the create's full validation, and that asks libphonenumber
//! for a valid number, so the magic value cannot come from the reserved
//! `+7 2xx` range (libphonenumber refuses it, and the create would be a
//! 400). It is `+44 20 7946 0503`: Ofcom keeps `020 7946 0000`-`0999` for
//! drama and never assigns them, and libphonenumber accepts them.
//!
//! Not for: deciding whether a key is a test key (the binary's
//! authentication), or live numbers (see [`crate::lease`]).

use crate::pool::Pool;
use crate::CompanyId;
use std::collections::{BTreeMap, HashMap};

/// The `phone` for which a test create always gets 503
/// `no_dial_number_available` (see the module doc).
pub const MAGIC_NO_NUMBER_PHONE: &str = "+442079460503";
/// Numbers per company and pool kind unless the company's setting says
/// otherwise: enough for a CI run's parallel tests.
pub const POOL_SIZE_DEFAULT: u32 = 100;
/// The most numbers one test pool can have (the three `NNN` digits).
pub const POOL_SIZE_MAX: u32 = 1_000;
/// The largest company id the numbering has digits for (`CCCCC`); a
/// company above it has no test pool (every test create is a 503).
pub const COMPANY_ID_MAX: CompanyId = 99_999;

const PREFIX: &str = "+72";

fn kind_digit(pool: Pool) -> char {
    match pool {
        Pool::Domestic => '0',
        Pool::International => '1',
    }
}

/// One test number, read back from its string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TestNumber {
    pub pool: Pool,
    pub company: CompanyId,
    pub index: u32,
}

impl TestNumber {
    /// The E.164 string; `None` when the company or index has no digits
    /// for it.
    pub fn to_e164(self) -> Option<String> {
        if !(0..=COMPANY_ID_MAX).contains(&self.company) || self.index >= POOL_SIZE_MAX {
            return None;
        }
        Some(format!(
            "{PREFIX}{}{:05}{:03}",
            kind_digit(self.pool),
            self.company,
            self.index
        ))
    }

    /// The test number `number` is, if it is one.
    pub fn parse(number: &str) -> Option<TestNumber> {
        let digits = number.strip_prefix(PREFIX)?;
        if digits.len() != 9 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let pool = match digits.as_bytes()[0] {
            b'0' => Pool::Domestic,
            b'1' => Pool::International,
            _ => return None,
        };
        Some(TestNumber {
            pool,
            company: digits[1..6].parse().ok()?,
            index: digits[6..].parse().ok()?,
        })
    }
}

/// Whether `number` lies in the test range (kind digit or not): a live
/// configuration must not list it.
pub fn in_test_range(number: &str) -> bool {
    number.starts_with(PREFIX) && number.len() == PREFIX.len() + 9
}

/// One company's pool of one kind: the held indices with their lease
/// generation, and where the next search starts (numbers are issued in
/// turn, so a number just released is the last to be issued again).
#[derive(Debug, Default)]
struct Held {
    leases: BTreeMap<u32, u32>,
    cursor: u32,
}

/// Why a recovered lease cannot be restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreError {
    NotATestNumber,
    AlreadyLeased,
}

/// The leases of every company's test pools. Pools exist only while they
/// hold something: a company that never ran a test costs nothing.
#[derive(Debug, Default)]
pub struct TestPools {
    pools: HashMap<(CompanyId, Pool), Held>,
    /// The generation the next lease gets; above every restored one.
    next_generation: u32,
}

impl TestPools {
    pub fn new() -> TestPools {
        TestPools::default()
    }

    /// Leases a free number of `company`'s `pool` of `size` numbers:
    /// `(number, generation)`, or `None` when all are leased.
    pub fn lease(&mut self, pool: Pool, company: CompanyId, size: u32) -> Option<(String, u32)> {
        let size = size.min(POOL_SIZE_MAX);
        if size == 0 || !(0..=COMPANY_ID_MAX).contains(&company) {
            return None;
        }
        let held = self.pools.entry((company, pool)).or_default();
        let index = (0..size)
            .map(|step| (held.cursor + step) % size)
            .find(|i| !held.leases.contains_key(i))?;
        let number = TestNumber {
            pool,
            company,
            index,
        }
        .to_e164()?;
        self.next_generation = self.next_generation.wrapping_add(1);
        held.leases.insert(index, self.next_generation);
        held.cursor = (index + 1) % size;
        Some((number, self.next_generation))
    }

    /// Releases `number` if it is leased with `generation`.
    pub fn release(&mut self, number: &str, generation: u32) -> bool {
        let Some(n) = TestNumber::parse(number) else {
            return false;
        };
        let Some(held) = self.pools.get_mut(&(n.company, n.pool)) else {
            return false;
        };
        if held.leases.get(&n.index) != Some(&generation) {
            return false;
        }
        held.leases.remove(&n.index);
        if held.leases.is_empty() {
            self.pools.remove(&(n.company, n.pool));
        }
        true
    }

    /// Marks `number` leased with `generation` again (recovery after a
    /// restart, from the pending rows).
    pub fn restore(&mut self, number: &str, generation: u32) -> Result<(), RestoreError> {
        let n = TestNumber::parse(number).ok_or(RestoreError::NotATestNumber)?;
        let held = self.pools.entry((n.company, n.pool)).or_default();
        if held.leases.contains_key(&n.index) {
            return Err(RestoreError::AlreadyLeased);
        }
        held.leases.insert(n.index, generation);
        self.next_generation = self.next_generation.max(generation);
        Ok(())
    }

    /// The generation `number` is leased with now, if it is.
    pub fn current(&self, number: &str) -> Option<u32> {
        let n = TestNumber::parse(number)?;
        self.pools
            .get(&(n.company, n.pool))?
            .leases
            .get(&n.index)
            .copied()
    }

    /// How many numbers of `company`'s `pool` are leased.
    pub fn leased(&self, pool: Pool, company: CompanyId) -> usize {
        self.pools
            .get(&(company, pool))
            .map_or(0, |h| h.leases.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_keep_the_e164_shape() {
        let n = TestNumber {
            pool: Pool::International,
            company: 42,
            index: 7,
        };
        let s = n.to_e164().unwrap();
        assert_eq!(s, "+72100042007");
        assert_eq!(s.len(), 12, "+ and eleven digits, like every +7 number");
        assert_eq!(TestNumber::parse(&s), Some(n));
        assert!(in_test_range(&s));
        assert_eq!(TestNumber::parse("+79161234567"), None);
        assert_eq!(TestNumber::parse("+72200042007"), None);
        let too_big = TestNumber {
            company: COMPANY_ID_MAX + 1,
            ..n
        };
        assert_eq!(too_big.to_e164(), None);
    }

    #[test]
    fn a_pool_holds_its_size_and_companies_do_not_share() {
        let mut p = TestPools::new();
        let a: Vec<_> = (0..3)
            .map(|_| p.lease(Pool::Domestic, 1, 3).expect("a free number"))
            .collect();
        assert_eq!(
            p.lease(Pool::Domestic, 1, 3),
            None,
            "a pool of 3 holds 3 leases"
        );
        assert!(
            p.lease(Pool::International, 1, 3).is_some(),
            "the other kind is a pool of its own"
        );
        assert!(
            p.lease(Pool::Domestic, 2, 3).is_some(),
            "another company's pool is its own"
        );
        assert!(!p.release(&a[0].0, a[0].1 + 100), "a stale generation");
        assert!(p.release(&a[0].0, a[0].1));
        let again = p.lease(Pool::Domestic, 1, 3).unwrap();
        assert_eq!(again.0, a[0].0, "the only free number");
        assert!(again.1 > a[2].1, "generations only grow");
    }

    #[test]
    fn restore_puts_leases_back_and_moves_generations_past_them() {
        let mut p = TestPools::new();
        p.restore("+72000001005", 500).unwrap();
        assert_eq!(
            p.restore("+72000001005", 501),
            Err(RestoreError::AlreadyLeased)
        );
        assert_eq!(
            p.restore("+79160000000", 1),
            Err(RestoreError::NotATestNumber)
        );
        assert_eq!(p.current("+72000001005"), Some(500));
        let (_, generation) = p.lease(Pool::Domestic, 1, 10).unwrap();
        assert!(generation > 500);
        assert_eq!(p.leased(Pool::Domestic, 1), 2);
    }
}
