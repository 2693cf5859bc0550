//! Building a [`LeaseTable`]: numbers are pushed one at a time, each packed
//! at once, then the sub-pools, slots and per-line words are laid out.
//!
//! Why one at a time: a caller that expands a million-number range can hand
//! over each number's string as it makes it, and the string is freed before
//! the next one exists. Holding all of them first (~32 B each in the
//! allocator) and freeing them after the table's arrays were allocated above
//! them leaves a hole the allocator keeps resident (measured: ~29 B per
//! configured number, issue 12).
//!
//! Not for: leasing (the parent module) or reading configuration (the
//! caller's; it hands over [`NumberSpec`]s).

use super::bitmap::{word_and_mask, SubPool};
use super::numbers::NumberIndex;
use super::{
    dedicated_filter_bit, AtomicBool, AtomicU64, CompanyId, LeaseTable, LineId, LineSpec,
    LineState, NumberSpec, Pool, Slot, SlotInfo, TableError, NUMBERS_COUNT_MAX, STATE_INITIAL,
    SUB_POOL_NONE,
};
use crate::e164::PackedNumber;
use std::collections::BTreeMap;

/// What the table keeps of a [`NumberSpec`] while it is built: no string.
struct Entry {
    number: PackedNumber,
    line: LineId,
    pool: Pool,
    active: bool,
    dedicated_to: Option<CompanyId>,
}

/// Collects numbers for a [`LeaseTable`]; slot `i` is the `i`-th pushed.
pub struct TableBuilder {
    lines: Vec<LineSpec>,
    numbers_max: usize,
    /// Numbers pushed, kept or not, for [`TableError::TooManyNumbers`].
    pushed: usize,
    entries: Vec<Entry>,
    /// The first number refused; later pushes are only counted.
    error: Option<TableError>,
}

/// Slots, bits and sub-pool indexes are below `NUMBERS_COUNT_MAX + 2`
/// (`build` refuses more numbers), far below `u32::MAX`.
fn to_u32(value: usize) -> u32 {
    u32::try_from(value).expect("bounded by NUMBERS_COUNT_MAX")
}

impl TableBuilder {
    /// An empty table on `lines`; numbers refer to a line by its index.
    pub fn new(lines: Vec<LineSpec>) -> TableBuilder {
        TableBuilder::with_numbers_max(lines, NUMBERS_COUNT_MAX)
    }

    /// With a lower limit than [`NUMBERS_COUNT_MAX`], so tests need not
    /// build a million numbers to hit it.
    pub(super) fn with_numbers_max(lines: Vec<LineSpec>, numbers_max: usize) -> TableBuilder {
        TableBuilder {
            lines,
            numbers_max: numbers_max.min(NUMBERS_COUNT_MAX),
            pushed: 0,
            entries: Vec::new(),
            error: None,
        }
    }

    /// Adds the next number. A number on an unknown line or not `+` and 1
    /// to 15 digits is kept as the error [`TableBuilder::build`] returns.
    pub fn push(&mut self, spec: NumberSpec) {
        self.pushed += 1;
        if self.error.is_some() || self.pushed > self.numbers_max {
            return;
        }
        if self.lines.get(spec.line as usize).is_none() {
            self.error = Some(TableError::UnknownLine {
                number: spec.number,
                line: spec.line,
            });
            return;
        }
        let Some(number) = PackedNumber::parse(&spec.number) else {
            self.error = Some(TableError::NotE164(spec.number));
            return;
        };
        self.entries.push(Entry {
            number,
            line: spec.line,
            pool: spec.pool,
            active: spec.active,
            dedicated_to: spec.dedicated_to,
        });
    }

    /// The table, or the first error: too many numbers, then the first
    /// number refused by [`TableBuilder::push`], then a duplicate.
    pub fn build(self) -> Result<LeaseTable, TableError> {
        if self.pushed > self.numbers_max {
            return Err(TableError::TooManyNumbers(self.pushed));
        }
        if let Some(error) = self.error {
            return Err(error);
        }
        let (lines, entries) = (self.lines, self.entries);
        let numbers = NumberIndex::new(entries.iter().map(|e| e.number).collect())?;
        let Layout {
            sub_pools,
            placement,
            dedicated,
        } = lay_out_sub_pools(&lines, &entries);
        let line_states = line_states(&lines, &entries, &placement);
        let slots: Box<[SlotInfo]> = entries
            .iter()
            .zip(placement)
            .map(|(entry, (sub_pool, bit))| SlotInfo {
                line: entry.line,
                sub_pool,
                bit,
            })
            .collect();
        let states = slots
            .iter()
            .map(|_| AtomicU64::new(STATE_INITIAL))
            .collect();
        Ok(LeaseTable {
            slots,
            numbers,
            states,
            sub_pools: sub_pools.into_boxed_slice(),
            dedicated_filter: dedicated
                .keys()
                .fold(0, |filter, company| filter | dedicated_filter_bit(*company)),
            dedicated: dedicated.into_iter().collect(),
            lines: line_states,
        })
    }
}

/// Where the numbers go, as [`lay_out_sub_pools`] decides.
struct Layout {
    /// In table order: both shared sub-pools at `Pool::index()`, then the
    /// dedicated ones by (pool, company).
    sub_pools: Vec<SubPool>,
    /// Each entry's (sub-pool, bit).
    placement: Vec<(u32, u32)>,
    /// Each dedicated company's sub-pool per `Pool::index()`.
    dedicated: BTreeMap<CompanyId, [u32; 2]>,
}

fn lay_out_sub_pools(lines: &[LineSpec], entries: &[Entry]) -> Layout {
    // Both shared sub-pools always exist (possibly empty) so they sit at
    // `Pool::index()` and stats always list both pools.
    let mut members: BTreeMap<(Pool, Option<CompanyId>), Vec<Slot>> = Pool::ALL
        .iter()
        .map(|pool| ((*pool, None), Vec::new()))
        .collect();
    for (index, entry) in entries.iter().enumerate() {
        members
            .entry((entry.pool, entry.dedicated_to))
            .or_default()
            .push(Slot(to_u32(index)));
    }
    let issuable_initially = |entry: &Entry| -> bool {
        let line = &lines[entry.line as usize]; // Checked by `push`.
        entry.active && line.active && line.up
    };
    let mut order: Vec<(Pool, Option<CompanyId>)> =
        Pool::ALL.iter().map(|pool| (*pool, None)).collect();
    order.extend(members.keys().filter(|(_, company)| company.is_some()));

    let mut placement = vec![(0u32, 0u32); entries.len()];
    let mut sub_pools = Vec::with_capacity(order.len());
    let mut dedicated: BTreeMap<CompanyId, [u32; 2]> = BTreeMap::new();
    for (sub_index, key) in order.iter().enumerate() {
        let slots = members.remove(key).unwrap_or_default();
        let issuable: Vec<bool> = slots
            .iter()
            .map(|slot| issuable_initially(&entries[slot.0 as usize]))
            .collect();
        for (bit, slot) in slots.iter().enumerate() {
            placement[slot.0 as usize] = (to_u32(sub_index), to_u32(bit));
        }
        if let (pool, Some(company)) = *key {
            dedicated.entry(company).or_insert([SUB_POOL_NONE; 2])[pool.index()] =
                to_u32(sub_index);
        }
        sub_pools.push(SubPool::new(key.0, key.1, slots, &issuable));
    }
    Layout {
        sub_pools,
        placement,
        dedicated,
    }
}

/// Per line: its flag, its count of numbers, and the issuable words its
/// active numbers occupy, merged so `set_line_up` does one RMW per word.
fn line_states(
    lines: &[LineSpec],
    entries: &[Entry],
    placement: &[(u32, u32)],
) -> Box<[LineState]> {
    let mut line_words: Vec<BTreeMap<(u32, u32), u64>> = vec![BTreeMap::new(); lines.len()];
    let mut line_numbers = vec![0usize; lines.len()];
    for (entry, &(sub_pool, bit)) in entries.iter().zip(placement) {
        line_numbers[entry.line as usize] += 1;
        if entry.active && lines[entry.line as usize].active {
            let (word, mask) = word_and_mask(bit as usize);
            *line_words[entry.line as usize]
                .entry((sub_pool, to_u32(word)))
                .or_insert(0) |= mask;
        }
    }
    lines
        .iter()
        .zip(line_words)
        .zip(line_numbers)
        .map(|((spec, words), numbers)| LineState {
            up: AtomicBool::new(spec.up),
            numbers,
            issuable_words: words
                .into_iter()
                .map(|((sub_pool, word), mask)| (sub_pool, word, mask))
                .collect(),
        })
        .collect()
}
