//! The live lease table and how it is rebuilt.
//!
//! The table itself is lock-free (`dialproof_engine::lease`). It is rebuilt
//! when the configuration is reloaded or a number is (un)dedicated: the new
//! table is built from the config plus the dedications in the database, every
//! current lease is carried over by number with its generation, and it is
//! swapped in under a write lock that leasing and releasing take for reading,
//! so no lease can be taken on the old table after its leases were copied.
//!
//! Test mode's pools (`dialproof_engine::test_pool`) live beside the table,
//! behind their own lock: they share nothing with the live numbers, and a
//! release or a restore goes to whichever of the two the number belongs to
//! (a test number is recognised by its reserved range), so the commit
//! consumer, the expiry and recovery treat both alike.
//!
//! Not for: deciding which number to lease (the engine does that).

use crate::shared::config::{Config, ConfiguredNumber, LineMode};
use anyhow::{Context, Result};
use dialproof_engine::lease::{Lease, LeaseTable, LineSpec, NumberSpec, TableBuilder};
use dialproof_engine::pool::Pool;
use dialproof_engine::test_pool::{TestNumber, TestPools};
use dialproof_engine::CompanyId;
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub struct Leases {
    table: RwLock<Arc<LeaseTable>>,
    test: Mutex<TestPools>,
}

/// The lease table's input for a configuration plus database dedications
/// (the database wins over `dedicated_to` in the file, being the newer
/// operator decision). `line_up` holds the SIP lines' current state by
/// name (`crate::sip::LineStates`); a line not in it starts as its mode
/// says: a registering line down until it registers, an IP-authenticated
/// one up until its pings fail. `withheld` numbers (quarantined, see
/// `crate::shared::number_health`) are built inactive: never issued, like a
/// number the file switches off, and a lease they hold is carried over.
pub fn build_table(
    config: &Config,
    dedicated: &[(String, CompanyId)],
    line_up: &HashMap<String, bool>,
    withheld: &HashSet<String>,
) -> Result<LeaseTable> {
    let lines = config
        .lines
        .iter()
        .map(|l| LineSpec {
            active: l.active,
            up: match l.mode {
                LineMode::AlwaysUp => true,
                LineMode::Register => line_up.get(&l.name).copied().unwrap_or(false),
                LineMode::IpAuth => line_up.get(&l.name).copied().unwrap_or(true),
            },
        })
        .collect();
    let dedicated: HashMap<&str, CompanyId> =
        dedicated.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    // One number at a time: the table packs each and frees its string
    // before the next is made (resident memory per number, issue 12).
    let mut builder = TableBuilder::new(lines);
    config.each_number(|n: ConfiguredNumber| {
        let active = n.active && !withheld.contains(&n.number);
        builder.push(NumberSpec {
            dedicated_to: dedicated.get(n.number.as_str()).copied().or(n.dedicated_to),
            number: n.number,
            pool: n.pool,
            line: n.line,
            active,
        })
    })?;
    builder.build().map_err(|e| anyhow::anyhow!("{e}"))
}

impl Leases {
    pub fn new(table: LeaseTable) -> Self {
        Leases {
            table: RwLock::new(Arc::new(table)),
            test: Mutex::new(TestPools::new()),
        }
    }

    pub fn lease(&self, pool: Pool, company: CompanyId) -> Option<(String, u32)> {
        let table = self.table.read();
        table
            .lease(pool, company)
            .map(|l| (table.number(l.slot), l.generation))
    }

    /// A number of `company`'s test pool of `pool`'s kind, which holds
    /// `size` numbers.
    pub fn lease_test(&self, pool: Pool, company: CompanyId, size: u32) -> Option<(String, u32)> {
        self.test.lock().lease(pool, company, size)
    }

    /// The generation a test number is leased with now, if it is.
    pub fn test_lease(&self, number: &str) -> Option<u32> {
        self.test.lock().current(number)
    }

    /// Releases `number` (live or test) if it is still leased with
    /// `generation`.
    pub fn release(&self, number: &str, generation: u32) -> bool {
        if TestNumber::parse(number).is_some() {
            return self.test.lock().release(number, generation);
        }
        let table = self.table.read();
        match table.slot_of(number) {
            Some(slot) => table.release(Lease { slot, generation }),
            None => false,
        }
    }

    /// Re-marks a number leased (recovery). Errors name the number.
    pub fn restore(&self, number: &str, generation: u32) -> Result<()> {
        if TestNumber::parse(number).is_some() {
            return self
                .test
                .lock()
                .restore(number, generation)
                .map_err(|e| anyhow::anyhow!("restoring test lease of {number}: {e:?}"));
        }
        self.table
            .read()
            .restore(number, generation)
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("restoring lease of {number}: {e:?}"))
    }

    /// Runs `f` on the current table under the read lock, so no rebuild
    /// swaps it out meanwhile (the SIP path: finding a dialled number's
    /// lease, marking a line up or down). `f` must not block.
    pub fn with_table<R>(&self, f: impl FnOnce(&LeaseTable) -> R) -> R {
        f(&self.table.read())
    }

    /// Swaps in `new`, carrying every current lease over. Leases of numbers
    /// that are no longer configured are reported and dropped (their
    /// verifications still expire normally; the number cannot be issued).
    pub fn replace(&self, new: LeaseTable) -> Result<usize> {
        let mut guard = self.table.write();
        let mut carried = 0;
        for (number, generation) in guard.leases() {
            match new.restore(&number, generation) {
                Ok(_) => carried += 1,
                Err(e) => tracing::warn!(%number, error = ?e,
                    "leased number is gone from the new configuration"),
            }
        }
        *guard = Arc::new(new);
        Ok(carried)
    }
}

/// Used by reload paths that need the config's line count checked.
pub fn check_reload(old: &Config, new: &Config) -> Result<()> {
    new.each_number(|_| ()).context("new configuration")?;
    if old.storage.data_dir != new.storage.data_dir {
        anyhow::bail!("storage.data_dir cannot change on reload; restart instead");
    }
    if old.sip != new.sip {
        anyhow::bail!("the [sip] section cannot change on reload; restart instead");
    }
    Ok(())
}
