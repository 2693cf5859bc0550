//! Unit tests of the lease table (single-threaded semantics, plus one
//! randomized multi-threaded run). Races are model-checked in
//! `engine/tests/loom_lease.rs`.

use super::*;
use std::sync::atomic::AtomicUsize as StdAtomicUsize;

const LINE_UP: LineSpec = LineSpec {
    active: true,
    up: true,
};

fn number(pool: Pool, index: usize) -> String {
    match pool {
        Pool::Domestic => format!("+7900{index:07}"),
        Pool::International => format!("+4470{index:07}"),
    }
}

fn spec(pool: Pool, index: usize, line: LineId) -> NumberSpec {
    NumberSpec {
        number: number(pool, index),
        pool,
        line,
        active: true,
        dedicated_to: None,
    }
}

fn dedicated(pool: Pool, index: usize, company: CompanyId) -> NumberSpec {
    NumberSpec {
        dedicated_to: Some(company),
        ..spec(pool, index, 0)
    }
}

/// `count` shared numbers of `pool` on line 0 of a single up line.
fn shared_table(pool: Pool, count: usize) -> LeaseTable {
    let numbers = (0..count).map(|i| spec(pool, i, 0)).collect();
    LeaseTable::new(vec![LINE_UP], numbers).expect("valid table")
}

fn lease_slot(table: &LeaseTable, pool: Pool, company: CompanyId) -> Option<u32> {
    table.lease(pool, company).map(|l| l.slot.0)
}

#[test]
fn rotation_does_not_reissue_a_just_released_number() {
    let table = shared_table(Pool::Domestic, 5);
    let a = table.lease(Pool::Domestic, 1).expect("free");
    let b = table.lease(Pool::Domestic, 1).expect("free");
    let c = table.lease(Pool::Domestic, 1).expect("free");
    assert_eq!([a.slot.0, b.slot.0, c.slot.0], [0, 1, 2]);
    assert!(table.release(b));
    // Slot 1 is free again but the others ahead of the cursor come first.
    assert_eq!(lease_slot(&table, Pool::Domestic, 1), Some(3));
    assert_eq!(lease_slot(&table, Pool::Domestic, 1), Some(4));
    // Wrapped around: now the released one, as the only free number.
    assert_eq!(lease_slot(&table, Pool::Domestic, 1), Some(1));
    assert_eq!(table.lease(Pool::Domestic, 1), None);
}

#[test]
fn lease_release_cycles_through_every_number_before_repeating() {
    // 130 numbers: three bitmap words, the last one partial.
    let count = 130;
    let table = shared_table(Pool::Domestic, count);
    let mut issued = Vec::new();
    for _ in 0..2 * count {
        let lease = table.lease(Pool::Domestic, 1).expect("pool never full");
        issued.push(lease.slot.0);
        assert!(table.release(lease));
    }
    let expected: Vec<u32> = (0..count as u32).chain(0..count as u32).collect();
    assert_eq!(issued, expected);
}

#[test]
fn cursor_wraps_inside_its_own_word() {
    // With the cursor in the middle of the only word, bits before it are
    // found on the wrap-around pass.
    let table = shared_table(Pool::Domestic, 10);
    let leases: Vec<Lease> = (0..6)
        .map(|_| table.lease(Pool::Domestic, 1).expect("free"))
        .collect();
    for lease in &leases[..3] {
        assert!(table.release(*lease));
    }
    let next: Vec<u32> = (0..7)
        .map(|_| lease_slot(&table, Pool::Domestic, 1).expect("free"))
        .collect();
    assert_eq!(next, [6, 7, 8, 9, 0, 1, 2]);
    assert_eq!(table.lease(Pool::Domestic, 1), None);
}

#[test]
fn generations_reject_stale_releases() {
    let table = shared_table(Pool::Domestic, 1);
    let first = table.lease(Pool::Domestic, 1).expect("free");
    assert_eq!(first.generation, 1);
    assert_eq!(table.current(first.slot), Some(first));
    assert!(table.release(first));
    assert!(!table.release(first), "double release");
    assert_eq!(table.current(first.slot), None);

    let second = table.lease(Pool::Domestic, 1).expect("free again");
    assert_eq!(second.slot, first.slot);
    assert_eq!(second.generation, 2);
    assert!(!table.release(first), "stale release of the older lease");
    assert_eq!(table.current(second.slot), Some(second));
    let future = Lease {
        slot: second.slot,
        generation: 3,
    };
    assert!(!table.release(future));
    assert_eq!(table.stats()[0].leased, 1);
    assert!(table.release(second));

    let foreign = Lease {
        slot: Slot(99),
        generation: 1,
    };
    assert!(!table.release(foreign));
    assert_eq!(table.current(Slot(99)), None);
}

#[test]
fn line_down_withholds_its_numbers_and_up_restores_them() {
    let numbers = vec![
        spec(Pool::Domestic, 0, 0),
        spec(Pool::Domestic, 1, 0),
        spec(Pool::Domestic, 2, 1),
        spec(Pool::Domestic, 3, 1),
    ];
    let table = LeaseTable::new(vec![LINE_UP, LINE_UP], numbers).expect("valid");
    let on_line_0 = table.lease(Pool::Domestic, 1).expect("free");
    assert_eq!(table.line_of(on_line_0.slot), 0);

    table.set_line_up(0, false);
    assert_eq!(table.line_up(0), Some(false));
    let rest: Vec<LineId> = std::iter::from_fn(|| table.lease(Pool::Domestic, 1))
        .map(|l| table.line_of(l.slot))
        .collect();
    assert_eq!(rest, [1, 1], "only line 1 issues while line 0 is down");
    // The lease taken before the line went down is untouched.
    assert_eq!(table.current(on_line_0.slot), Some(on_line_0));
    assert_eq!(table.stats()[0].issuable, 2);
    assert_eq!(table.stats()[0].leased, 3);
    assert!(table.release(on_line_0));
    assert_eq!(table.lease(Pool::Domestic, 1), None, "line 0 still down");

    table.set_line_up(0, true);
    let back = table.lease(Pool::Domestic, 1).expect("line 0 is up");
    assert_eq!(table.line_of(back.slot), 0);
    // Idempotent and unknown lines ignored.
    table.set_line_up(0, true);
    table.set_line_up(7, false);
    assert_eq!(table.line_up(7), None);
}

#[test]
fn a_line_configured_down_issues_nothing_until_up() {
    let lines = vec![LineSpec {
        active: true,
        up: false,
    }];
    let table = LeaseTable::new(lines, vec![spec(Pool::Domestic, 0, 0)]).expect("valid");
    assert_eq!(table.lease(Pool::Domestic, 1), None);
    table.set_line_up(0, true);
    assert!(table.lease(Pool::Domestic, 1).is_some());
}

#[test]
fn inactive_numbers_and_inactive_lines_are_never_issued() {
    let lines = vec![
        LINE_UP,
        LineSpec {
            active: false,
            up: true,
        },
    ];
    let numbers = vec![
        NumberSpec {
            active: false,
            ..spec(Pool::Domestic, 0, 0)
        },
        spec(Pool::Domestic, 1, 1),
        spec(Pool::Domestic, 2, 0),
    ];
    let table = LeaseTable::new(lines, numbers).expect("valid");
    assert_eq!(lease_slot(&table, Pool::Domestic, 1), Some(2));
    assert_eq!(table.lease(Pool::Domestic, 1), None);
    // Registration events do not override the operator's switches.
    table.set_line_up(1, true);
    table.set_line_up(0, false);
    table.set_line_up(0, true);
    assert_eq!(table.lease(Pool::Domestic, 1), None);
    assert_eq!(table.stats()[0].issuable, 1);
    // An inactive number can still be restored (a pending verification
    // from before the operator switched it off).
    assert!(table.restore(&number(Pool::Domestic, 0), 3).is_ok());
}

#[test]
fn dedicated_numbers_go_first_then_shared() {
    let numbers = vec![
        spec(Pool::Domestic, 0, 0),
        dedicated(Pool::Domestic, 1, 7),
        spec(Pool::Domestic, 2, 0),
        dedicated(Pool::Domestic, 3, 7),
    ];
    let table = LeaseTable::new(vec![LINE_UP], numbers).expect("valid");
    let issued: Vec<u32> = std::iter::from_fn(|| lease_slot(&table, Pool::Domestic, 7)).collect();
    assert_eq!(issued, [1, 3, 0, 2]);
}

#[test]
fn other_companies_never_get_dedicated_numbers() {
    let numbers = vec![
        dedicated(Pool::Domestic, 0, 7),
        dedicated(Pool::Domestic, 1, 7),
        spec(Pool::Domestic, 2, 0),
        dedicated(Pool::International, 3, 8),
        spec(Pool::Domestic, 4, 0),
        dedicated(Pool::Domestic, 5, 7),
    ];
    let table = LeaseTable::new(vec![LINE_UP], numbers).expect("valid");
    // Company 9 has nothing dedicated; company 8 only international ones.
    assert_eq!(lease_slot(&table, Pool::Domestic, 9), Some(2));
    assert_eq!(lease_slot(&table, Pool::Domestic, 8), Some(4));
    assert_eq!(table.lease(Pool::Domestic, 9), None);
    assert_eq!(table.lease(Pool::Domestic, 8), None);
    assert_eq!(table.lease(Pool::International, 9), None);
    assert_eq!(table.lease(Pool::International, 6), None);
    // Company ids around and beyond the dedicated ones, and ones sharing
    // company 7's filter bit (id modulo 64), which must fall through to the
    // exact search.
    for company in [i64::MIN, -57, -1, 0, 6, 10, 71, 7 + 64 * 1000, i64::MAX] {
        assert_eq!(table.lease(Pool::Domestic, company), None);
    }
    // The owners still get theirs.
    assert_eq!(lease_slot(&table, Pool::International, 8), Some(3));
    let company_7: Vec<u32> =
        std::iter::from_fn(|| lease_slot(&table, Pool::Domestic, 7)).collect();
    assert_eq!(company_7, [0, 1, 5]);
}

#[test]
fn one_pool_exhausted_while_the_other_issues() {
    let numbers = vec![
        spec(Pool::Domestic, 0, 0),
        spec(Pool::International, 1, 0),
        spec(Pool::International, 2, 0),
        spec(Pool::International, 3, 0),
    ];
    let table = LeaseTable::new(vec![LINE_UP], numbers).expect("valid");
    assert_eq!(lease_slot(&table, Pool::Domestic, 1), Some(0));
    assert_eq!(table.lease(Pool::Domestic, 1), None);
    let international: Vec<u32> =
        std::iter::from_fn(|| lease_slot(&table, Pool::International, 1)).collect();
    assert_eq!(international, [1, 2, 3]);
}

#[test]
fn restore_marks_leased_with_the_stored_generation() {
    let lines = vec![
        LINE_UP,
        LineSpec {
            active: true,
            up: false,
        },
    ];
    let numbers = vec![spec(Pool::Domestic, 0, 0), spec(Pool::Domestic, 1, 1)];
    let table = LeaseTable::new(lines, numbers).expect("valid");
    let down = number(Pool::Domestic, 1);

    // Works on a down line.
    let restored = table.restore(&down, 41).expect("free");
    assert_eq!(
        restored,
        Lease {
            slot: Slot(1),
            generation: 41
        }
    );
    assert_eq!(table.current(Slot(1)), Some(restored));
    assert_eq!(
        table.restore(&down, 5),
        Err(RestoreError::AlreadyLeased(down.clone()))
    );
    assert_eq!(
        table.restore("+10000000000", 1),
        Err(RestoreError::UnknownNumber("+10000000000".into()))
    );
    // A restored number is not issued again; the other one is.
    let up = table
        .restore(&number(Pool::Domestic, 0), u32::MAX)
        .expect("free");
    assert_eq!(table.lease(Pool::Domestic, 1), None);
    assert_eq!(
        table.restore(&number(Pool::Domestic, 0), 1),
        Err(RestoreError::AlreadyLeased(number(Pool::Domestic, 0)))
    );

    // Generations continue from the restored one (and wrap).
    assert!(!table.release(Lease {
        generation: 40,
        ..restored
    }));
    assert!(table.release(restored));
    assert!(table.release(up));
    table.set_line_up(1, true);
    let again: Vec<Lease> = std::iter::from_fn(|| table.lease(Pool::Domestic, 1)).collect();
    assert_eq!(
        again,
        [
            Lease {
                slot: Slot(0),
                generation: 0
            },
            Lease {
                slot: Slot(1),
                generation: 42
            }
        ]
    );
}

#[test]
fn leases_lists_live_leases_and_carries_them_into_a_rebuilt_table() {
    let table = shared_table(Pool::Domestic, 4);
    let a = table.lease(Pool::Domestic, 1).expect("free");
    let b = table.lease(Pool::Domestic, 1).expect("free");
    let c = table.lease(Pool::Domestic, 1).expect("free");
    assert!(table.release(b));
    let d = table.restore(&number(Pool::Domestic, 3), 17).expect("free");
    assert_eq!(table.current(c.slot), Some(c));
    assert_eq!(
        table.leases(),
        vec![
            (number(Pool::Domestic, 0), a.generation),
            (number(Pool::Domestic, 2), c.generation),
            (number(Pool::Domestic, 3), d.generation),
        ]
    );

    // Rebuild in another order, with one number dedicated now.
    let mut numbers: Vec<NumberSpec> = (0..4).rev().map(|i| spec(Pool::Domestic, i, 0)).collect();
    numbers[0].dedicated_to = Some(5);
    let rebuilt = LeaseTable::new(vec![LINE_UP], numbers).expect("valid");
    for (number, generation) in table.leases() {
        rebuilt.restore(&number, generation).expect("carried");
    }
    let mut carried = rebuilt.leases();
    carried.sort();
    assert_eq!(carried, table.leases());
    assert_eq!(lease_slot(&rebuilt, Pool::Domestic, 1), Some(2)); // number 1
    assert_eq!(rebuilt.lease(Pool::Domestic, 5), None);
}

#[test]
fn stats_count_each_sub_pool() {
    let lines = vec![
        LINE_UP,
        LineSpec {
            active: true,
            up: false,
        },
    ];
    let numbers = vec![
        spec(Pool::International, 0, 0),
        spec(Pool::Domestic, 1, 0),
        spec(Pool::Domestic, 2, 1),
        NumberSpec {
            active: false,
            ..spec(Pool::Domestic, 3, 0)
        },
        dedicated(Pool::Domestic, 4, 9),
        dedicated(Pool::Domestic, 5, 2),
        dedicated(Pool::International, 6, 2),
    ];
    let table = LeaseTable::new(lines, numbers).expect("valid");
    table.lease(Pool::Domestic, 2).expect("dedicated");
    table.lease(Pool::Domestic, 2).expect("shared");
    table.restore(&number(Pool::Domestic, 2), 1).expect("free");
    let stats = |pool, dedicated_to, total, issuable, leased| PoolStats {
        pool,
        dedicated_to,
        total,
        issuable,
        leased,
    };
    assert_eq!(
        table.stats(),
        vec![
            stats(Pool::Domestic, None, 3, 1, 2),
            stats(Pool::Domestic, Some(2), 1, 1, 1),
            stats(Pool::Domestic, Some(9), 1, 1, 0),
            stats(Pool::International, None, 1, 1, 0),
            stats(Pool::International, Some(2), 1, 1, 0),
        ]
    );
    // An empty table still lists both shared pools.
    let empty = LeaseTable::new(Vec::new(), Vec::new()).expect("valid");
    assert_eq!(
        empty.stats(),
        vec![
            stats(Pool::Domestic, None, 0, 0, 0),
            stats(Pool::International, None, 0, 0, 0),
        ]
    );
    assert_eq!(empty.lease(Pool::Domestic, 1), None);
}

fn table_with_numbers_max(
    numbers: Vec<NumberSpec>,
    numbers_max: usize,
) -> Result<LeaseTable, TableError> {
    let mut builder = TableBuilder::with_numbers_max(vec![LINE_UP], numbers_max);
    for spec in numbers {
        builder.push(spec);
    }
    builder.build()
}

#[test]
fn new_rejects_duplicates_unknown_lines_and_too_many_numbers() {
    let duplicate = vec![spec(Pool::Domestic, 0, 0), spec(Pool::Domestic, 0, 0)];
    assert_eq!(
        LeaseTable::new(vec![LINE_UP], duplicate).err(),
        Some(TableError::DuplicateNumber(number(Pool::Domestic, 0)))
    );
    let off_line = vec![spec(Pool::Domestic, 0, 1)];
    assert_eq!(
        LeaseTable::new(vec![LINE_UP], off_line).err(),
        Some(TableError::UnknownLine {
            number: number(Pool::Domestic, 0),
            line: 1
        })
    );
    let three: Vec<NumberSpec> = (0..3).map(|i| spec(Pool::Domestic, i, 0)).collect();
    assert_eq!(
        table_with_numbers_max(three.clone(), 2).err(),
        Some(TableError::TooManyNumbers(3))
    );
    assert!(table_with_numbers_max(three, 3).is_ok());
}

#[test]
fn lookups_by_number_and_slot() {
    let numbers = vec![spec(Pool::Domestic, 0, 1), spec(Pool::International, 1, 0)];
    let table = LeaseTable::new(vec![LINE_UP, LINE_UP], numbers).expect("valid");
    let slot = table
        .slot_of(&number(Pool::International, 1))
        .expect("known");
    assert_eq!(slot, Slot(1));
    assert_eq!(table.number(slot), number(Pool::International, 1));
    assert_eq!(table.line_of(Slot(0)), 1);
    assert_eq!(table.slot_of("+1"), None);
    assert_eq!(table.number(Slot(2)), "");
    assert_eq!(table.line_of(Slot(2)), LineId::MAX);
}

/// xorshift64: a seeded, dependency-free generator for the randomized test.
struct XorShift64(u64);

impl XorShift64 {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

/// Four threads lease, release, release stale leases and flap a line on a
/// small table (so they collide on the same words), and record every slot
/// they hold in a side table: a slot found already held is a double lease.
#[test]
fn randomized_four_threads_never_hold_a_slot_twice() {
    const THREADS_COUNT: usize = 4;
    const OPS_PER_THREAD_COUNT: usize = 100_000;
    const SEED: u64 = 0x9E37_79B9_7F4A_7C15;
    const RELEASED_KEPT_COUNT: usize = 64;
    const COMPANY_DEDICATED: CompanyId = 1;

    // Domestic: 70 shared over two lines (crosses a word boundary) and 4
    // dedicated; international: 3 shared. Fewer numbers than 4 threads can
    // hold, so pools run dry and refill all the time.
    let mut numbers: Vec<NumberSpec> = (0..70)
        .map(|i| spec(Pool::Domestic, i, (i % 2) as LineId))
        .collect();
    numbers.extend((70..74).map(|i| dedicated(Pool::Domestic, i, COMPANY_DEDICATED)));
    numbers.extend((74..77).map(|i| spec(Pool::International, i, 1)));
    let specs = numbers.clone();
    let table = LeaseTable::new(vec![LINE_UP, LINE_UP], numbers).expect("valid");
    let holders: Vec<StdAtomicUsize> = (0..specs.len()).map(|_| StdAtomicUsize::new(0)).collect();

    // All threads start together, so they really overlap.
    let start = std::sync::Barrier::new(THREADS_COUNT);
    std::thread::scope(|scope| {
        for thread in 0..THREADS_COUNT {
            let (table, holders, specs, start) = (&table, &holders, &specs, &start);
            scope.spawn(move || {
                start.wait();
                let holder = thread + 1;
                let company = (thread % 3) as CompanyId; // 0, 1 (dedicated), 2
                let mut rng =
                    XorShift64(SEED ^ (holder as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
                let mut held: Vec<Lease> = Vec::new();
                let mut released: Vec<Lease> = Vec::new();
                for _ in 0..OPS_PER_THREAD_COUNT {
                    match rng.below(10) {
                        0..=4 => {
                            let pool = Pool::ALL[rng.below(4) / 3]; // 3:1 domestic
                            let Some(lease) = table.lease(pool, company) else {
                                continue;
                            };
                            let slot = lease.slot.0 as usize;
                            assert_eq!(
                                holders[slot].compare_exchange(
                                    0,
                                    holder,
                                    Ordering::SeqCst,
                                    Ordering::SeqCst
                                ),
                                Ok(0),
                                "slot {slot} leased while held"
                            );
                            assert_eq!(specs[slot].pool, pool);
                            if let Some(owner) = specs[slot].dedicated_to {
                                assert_eq!(owner, company, "another company's number");
                            }
                            assert_eq!(table.current(lease.slot), Some(lease));
                            held.push(lease);
                        }
                        5..=7 if !held.is_empty() => {
                            let lease = held.swap_remove(rng.below(held.len()));
                            // Unmark before releasing: once released, another
                            // thread may lease the slot at once.
                            assert_eq!(
                                holders[lease.slot.0 as usize].swap(0, Ordering::SeqCst),
                                holder
                            );
                            assert!(table.release(lease), "release of a held lease");
                            if released.len() == RELEASED_KEPT_COUNT {
                                released.swap_remove(rng.below(RELEASED_KEPT_COUNT));
                            }
                            released.push(lease);
                        }
                        8 if !released.is_empty() => {
                            let stale = released[rng.below(released.len())];
                            assert!(!table.release(stale), "stale release accepted");
                        }
                        9 if thread == 0 => table.set_line_up(1, rng.below(2) == 0),
                        _ => {
                            let slot = Slot(rng.below(specs.len()) as u32);
                            // Racy by nature; only checks it does not panic
                            // and reports a lease only for a claimed slot.
                            let _ = table.current(slot);
                        }
                    }
                }
                for lease in held {
                    assert_eq!(
                        holders[lease.slot.0 as usize].swap(0, Ordering::SeqCst),
                        holder
                    );
                    assert!(table.release(lease));
                }
            });
        }
    });

    assert_eq!(table.leases(), Vec::new());
    assert!(table.stats().iter().all(|s| s.leased == 0));
}

#[test]
fn line_stats_count_each_lines_numbers_across_pools() {
    let numbers = vec![
        spec(Pool::Domestic, 0, 0),
        spec(Pool::International, 1, 0),
        NumberSpec {
            active: false,
            ..spec(Pool::Domestic, 2, 0)
        },
        spec(Pool::Domestic, 3, 1),
    ];
    let table = LeaseTable::new(vec![LINE_UP, LINE_UP], numbers).expect("valid");
    let stats = |line: usize| table.line_stats()[line];
    assert_eq!(table.line_stats().len(), 2);
    assert_eq!(
        (stats(0).total, stats(0).issuable, stats(0).leased),
        (3, 2, 0)
    );
    let a = table.lease(Pool::International, 1).expect("free");
    assert_eq!(table.line_of(a.slot), 0);
    assert_eq!(stats(0).leased, 1);
    assert_eq!((stats(1).total, stats(1).leased), (1, 0));
    // Down: nothing issuable, the lease still counted.
    table.set_line_up(0, false);
    assert_eq!((stats(0).issuable, stats(0).leased), (0, 1));
    assert!(table.release(a));
    assert_eq!(stats(0).leased, 0);
    assert_eq!(stats(1).line, 1);
}

/// The per-number cost of the table, pinned: a configured number may cost
/// at most 64 B of the whole process's resident memory (issue 12), and the
/// table is nearly all of it. 48 B of arrays per number: its place (12),
/// its packed number (8), its index entry (16), its state word (8), its
/// sub-pool's bit-to-slot entry (4); plus two bitmap bits.
#[test]
fn a_configured_number_costs_48_bytes_of_table_arrays() {
    use std::mem::size_of;
    assert_eq!(size_of::<SlotInfo>(), 12);
    assert_eq!(size_of::<crate::e164::PackedNumber>(), 8);
    assert_eq!(size_of::<(crate::e164::PackedNumber, Slot)>(), 16);
    assert_eq!(size_of::<AtomicU64>(), 8);
    assert_eq!(size_of::<Slot>(), 4);

    // Two lines, both pools, two dedicated companies: every kind of array.
    let count = 64 * 1000;
    let numbers: Vec<NumberSpec> = (0..count)
        .map(|i| match i % 4 {
            0 => spec(Pool::International, i, 1),
            1 if i % 100 == 1 => dedicated(Pool::Domestic, i, 7),
            2 if i % 100 == 2 => dedicated(Pool::International, i, 9),
            _ => spec(Pool::Domestic, i, 0),
        })
        .collect();
    let table = LeaseTable::new(vec![LINE_UP, LINE_UP], numbers).expect("valid");
    let per_number = table.heap_bytes() as f64 / count as f64;
    assert!(
        (48.0..49.0).contains(&per_number),
        "{per_number} B of table arrays per number"
    );
}

#[test]
fn every_number_of_a_large_table_is_found_and_rendered_back() {
    let count = 20_000;
    let numbers: Vec<NumberSpec> = (0..count)
        .map(|i| spec([Pool::Domestic, Pool::International][i % 2], i, 0))
        .collect();
    let texts: Vec<String> = numbers.iter().map(|n| n.number.clone()).collect();
    let table = LeaseTable::new(vec![LINE_UP], numbers).expect("valid");
    for (index, text) in texts.iter().enumerate() {
        let slot = Slot(index as u32);
        assert_eq!(table.slot_of(text), Some(slot), "{text}");
        assert_eq!(table.number(slot), *text);
    }
    // Near misses are not found: one digit more or less, no '+', spaces.
    for text in [
        "+7900000000",
        "+790000000000",
        "79000000000",
        "+7900 0000000",
    ] {
        assert_eq!(table.slot_of(text), None, "{text}");
    }
}

#[test]
fn new_rejects_a_number_that_is_not_plus_and_digits() {
    for text in ["74950000001", "+7495000000x", "+1234567890123456", "+"] {
        let bad = vec![
            spec(Pool::Domestic, 0, 0),
            NumberSpec {
                number: text.to_owned(),
                ..spec(Pool::Domestic, 1, 0)
            },
        ];
        assert_eq!(
            LeaseTable::new(vec![LINE_UP], bad).err(),
            Some(TableError::NotE164(text.to_owned()))
        );
    }
}
