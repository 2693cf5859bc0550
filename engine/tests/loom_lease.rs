//! Loom model checks of the lease table's races: every interleaving (up to
//! loom's default bounds) of two threads on a tiny table.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p dialproof-engine --test loom_lease --release
//! ```
//!
//! Each model has two threads and tables of one or two bitmap words, so it
//! finishes in seconds. The separate target directory keeps the loom build
//! (every crate compiled with `--cfg loom`) from evicting the normal one.
//!
//! A test target of its own, not a module of `tests/it`: only this one is
//! built with `--cfg loom` (see `tests/it/main.rs`); in a normal build it
//! is empty.
//!
//! Not for: races of the service as a whole (the root package's crash and
//! failover tests).
#![cfg(loom)]

use dialproof_engine::lease::{LeaseTable, LineId, LineSpec, NumberSpec, Slot};
use dialproof_engine::pool::Pool;
use loom::sync::Arc;
use loom::thread;

const COMPANY: i64 = 1;

/// `lines_count` up lines with `per_line_count` shared domestic numbers each.
fn table(lines_count: usize, per_line_count: usize) -> Arc<LeaseTable> {
    let lines = vec![
        LineSpec {
            active: true,
            up: true
        };
        lines_count
    ];
    let numbers = (0..lines_count * per_line_count)
        .map(|i| NumberSpec {
            number: format!("+7900{i:07}"),
            pool: Pool::Domestic,
            line: (i / per_line_count) as LineId,
            active: true,
            dedicated_to: None,
        })
        .collect();
    Arc::new(LeaseTable::new(lines, numbers).expect("valid table"))
}

fn leased_count(table: &LeaseTable) -> usize {
    table.stats().iter().map(|s| s.leased).sum()
}

#[test]
fn two_threads_leasing_never_get_the_same_slot() {
    loom::model(|| {
        let table = table(1, 2);
        let other = {
            let table = table.clone();
            thread::spawn(move || table.lease(Pool::Domestic, COMPANY))
        };
        let mine = table.lease(Pool::Domestic, COMPANY);
        let other = other.join().expect("thread");
        let (mine, other) = (mine.expect("two numbers"), other.expect("two numbers"));
        assert_ne!(mine.slot, other.slot);
        assert_eq!(table.current(mine.slot), Some(mine));
        assert_eq!(table.current(other.slot), Some(other));
        assert_eq!(table.lease(Pool::Domestic, COMPANY), None);
    });
}

#[test]
fn two_threads_leasing_the_last_number_exactly_one_wins() {
    loom::model(|| {
        let table = table(1, 1);
        let other = {
            let table = table.clone();
            thread::spawn(move || table.lease(Pool::Domestic, COMPANY))
        };
        let mine = table.lease(Pool::Domestic, COMPANY);
        let other = other.join().expect("thread");
        assert!(mine.is_some() != other.is_some(), "{mine:?} {other:?}");
        assert_eq!(leased_count(&table), 1);
    });
}

#[test]
fn concurrent_lease_and_release() {
    loom::model(|| {
        let table = table(1, 1);
        let held = table.lease(Pool::Domestic, COMPANY).expect("free");
        let releaser = {
            let table = table.clone();
            thread::spawn(move || table.release(held))
        };
        let leased = table.lease(Pool::Domestic, COMPANY);
        assert!(releaser.join().expect("thread"));
        match leased {
            // Got the number after its release: the next generation.
            Some(lease) => {
                assert_eq!(lease.slot, held.slot);
                assert_eq!(lease.generation, held.generation + 1);
                assert_eq!(table.current(lease.slot), Some(lease));
                assert_eq!(leased_count(&table), 1);
            }
            None => {
                assert_eq!(table.current(held.slot), None);
                assert_eq!(leased_count(&table), 0);
            }
        }
    });
}

#[test]
fn stale_release_never_frees_a_newer_lease() {
    loom::model(|| {
        let table = table(1, 1);
        let older = table.lease(Pool::Domestic, COMPANY).expect("free");
        assert!(table.release(older));
        let last = table.lease(Pool::Domestic, COMPANY).expect("free again");
        assert!(table.release(last));
        // A late duplicate release of the lease just released (say an expiry
        // after the call) and one of an older lease race a new lease of the
        // slot, including the instant where the new lease has claimed the
        // bit but not yet published its generation.
        let late = {
            let table = table.clone();
            thread::spawn(move || (table.release(last), table.release(older)))
        };
        let newest = table.lease(Pool::Domestic, COMPANY).expect("released");
        let (last_released, older_released) = late.join().expect("thread");
        assert!(!last_released, "duplicate release accepted");
        assert!(!older_released, "stale release accepted");
        assert_eq!(newest.generation, last.generation + 1);
        assert_eq!(table.current(newest.slot), Some(newest));
        assert_eq!(leased_count(&table), 1);
    });
}

#[test]
fn racing_releases_of_one_lease_succeed_once() {
    loom::model(|| {
        let table = table(1, 1);
        let held = table.lease(Pool::Domestic, COMPANY).expect("free");
        let other = {
            let table = table.clone();
            thread::spawn(move || table.release(held))
        };
        let mine = table.release(held);
        let other = other.join().expect("thread");
        assert!(mine != other, "exactly one release wins");
        assert_eq!(table.current(held.slot), None);
        assert_eq!(leased_count(&table), 0);
    });
}

#[test]
fn lease_racing_set_line_up() {
    loom::model(|| {
        // Slot 0 on line 0 (taken down concurrently), slot 1 on line 1.
        let table = table(2, 1);
        let setter = {
            let table = table.clone();
            thread::spawn(move || table.set_line_up(0, false))
        };
        // Line 1 stays up, so the lease never fails, whichever way it races.
        let first = table.lease(Pool::Domestic, COMPANY).expect("line 1 is up");
        setter.join().expect("thread");
        assert_eq!(table.current(first.slot), Some(first));
        let issuable: usize = table.stats().iter().map(|s| s.issuable).sum();
        assert_eq!(issuable, 1, "line 0 withheld, line 1 issuable");
        // Now line 0 is down for sure: only line 1 can still be issued.
        let second = table.lease(Pool::Domestic, COMPANY);
        if first.slot == Slot(0) {
            assert_eq!(second.map(|l| l.slot), Some(Slot(1)));
        } else {
            assert_eq!(second, None);
        }
        assert!(table.release(first));
    });
}

#[test]
fn racing_set_line_up_calls_leave_the_line_consistent() {
    loom::model(|| {
        // 65 numbers on one line: two bitmap words that must agree.
        let table = table(1, 65);
        let setter = {
            let table = table.clone();
            thread::spawn(move || table.set_line_up(0, false))
        };
        table.set_line_up(0, true);
        setter.join().expect("thread");
        let up = table.line_up(0).expect("line 0 exists");
        let issuable: usize = table.stats().iter().map(|s| s.issuable).sum();
        assert_eq!(issuable, if up { 65 } else { 0 });
    });
}
