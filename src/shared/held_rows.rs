//! Pending verifications held in memory, packed, so that a GET of one a
//! client is still polling is answered without SQLite: the card's shape,
//! live state in memory and SQLite behind it.
//!
//! Why packed: clients poll the many verifications they created in the
//! last minutes, not the newest few. Held as rendered JSON bodies (about
//! 700 B each with their map entries) the same memory covered the 16,384
//! newest; packed, a pending verification is a 48-byte record (its id's
//! 128 bits, the phone and the number dialled packed (`dialproof_engine::e164`),
//! TTL, company)
//! plus its `client_ref` and `info` bytes, so [`HELD_BYTES_MAX`] covers
//! about 95,000 of them with short `client_ref`s: the first polls of what
//! was created in the last 95 s at 1,000 creates a second, or the last
//! 9 s at 10,000. What a
//! record leaves out is implied by "pending and live": no completion, no
//! caller, `created_at` is the id's own moment and `expires_at` follows
//! from the TTL. A row that does not fit that shape exactly (a phone that
//! is not `+` and digits, a moment that differs from its id's) is simply
//! not held, and SQLite answers for it.
//!
//! Who writes: the commit consumer, in commit order: a create adds its
//! row, any change of status takes it out (a terminal row is read from
//! SQLite; clients read it once or twice). A GET first waits until the
//! consumer has applied every commit made before it arrived, so what it
//! finds here is never older than what SQLite holds.
//!
//! Test-mode rows are not held (the purge deletes them after their
//! retention; a held copy would outlive its row).
//!
//! Read again: a pending verification a GET had to read from SQLite (older
//! than the held ones, or made before the last start) is kept too, so a
//! client polling it is answered from memory from its second GET on. Why:
//! clients poll a verification until it ends, and one polled past the
//! held window went to SQLite on every poll; a client base polls many
//! (a working set of 150,000 is what `tools/create-vs-axum.sh` reads), so
//! these copies are many too. They live in two generations a shard: new
//! copies go to the young one; when it is full (of [`GENERATION_COPIES`]
//! copies, or [`GENERATION_TEXT_BYTES`] of texts) the old one is emptied
//! and the two swap, so the copies read longest ago leave together, in
//! one step and without an order to keep, and between a half and all of
//! [`REREAD_COPIES_MAX`] are held at any time. A copy is kept only if no
//! change of status reached its shard while the GET read it (the GET
//! notes the shard's count of changes first): a change committed after
//! the read's snapshot then either came before the copy (and the copy is
//! refused) or takes the copy out like any held record.
//!
//! Bounded: each shard keeps its records sorted by id (ids are issued in
//! time order, so a new one lands at or near the end) and, past its share
//! of [`HELD_BYTES_MAX`], drops its oldest. Records taken out are marked
//! and swept once they are a quarter of the shard; text bytes left behind
//! are swept once they are half of its text.
//!
//! Not for: lists or anything but a GET by id (the dashboard reads
//! SQLite), nor deciding anything.

use dialproof_engine::e164::PackedNumber;
use dialproof_engine::guided_search;
use dialproof_engine::ids::{VerificationKey, VERIFICATION_ID_LEN};
use dialproof_engine::verification::Status;
use dialproof_engine::word_hash::BuildWordHasher;
use dialproof_storage::{Owner, VerificationRow, VerificationView};
use parking_lot::RwLock;
use std::collections::{HashMap, VecDeque};

/// Most bytes of records and text held, over all shards. The copies read
/// from SQLite (at most [`REREAD_BYTES_MAX`]) come on top. Why 6 MiB and
/// not more: these records serve a verification's first polls; every
/// later poll of one pushed out is answered by a copy after one read on
/// the worker's own connection, so a larger bound buys first reads at a
/// fixed cost that the 128 B per pending verification asked at 300,000
/// does not leave room for (12 MiB was 36 B of it).
pub const HELD_BYTES_MAX: usize = 6 * 1024 * 1024;
/// Shards, so that the consumer's writes and the workers' reads rarely
/// meet on one lock (each holds it for a search and a render at most).
const SHARDS: usize = 16;
const _: () = assert!(SHARDS == 1 << 4, "the shard index is a hash's top 4 bits");
/// A record with neither `client_ref` nor `info`.
const NO_TEXT: u32 = u32::MAX;
/// Text sweeps are not worth it below this many bytes of text.
const TEXT_SWEEP_MIN: usize = 4 * 1024;
/// Slots of a generation's hash map, reserved once.
const GENERATION_SLOTS: usize = 8 * 1024;
/// Copies read from SQLite a generation holds (two a shard): what its map
/// holds at the 7/8 load at which it would grow (7,168), so it never grows
/// past the slots reserved for it.
const GENERATION_COPIES: usize = GENERATION_SLOTS / 8 * 7;
/// A map slot's bytes: a copy's key and record, and a control byte.
const SLOT_BYTES: usize = std::mem::size_of::<(VerificationKey, CopyRecord)>() + 1;
/// Bytes of texts (`client_ref` and `info`) a generation holds.
const GENERATION_TEXT_BYTES: usize = 192 * 1024;
const _: () = assert!(
    4 + 2 * u16::MAX as usize <= GENERATION_TEXT_BYTES,
    "an empty generation takes the longest texts a record points to"
);
/// Copies read from SQLite held at most, over all shards: 229,376, of
/// which at least half at any time (see the module doc). With the 150,000
/// polled verifications a busy client base has, most polls of one read
/// once from SQLite are then answered from memory.
pub const REREAD_COPIES_MAX: usize = SHARDS * 2 * GENERATION_COPIES;
/// The copies' bytes at most: each generation's map and its texts, two a
/// shard: about 18.3 MiB. They are taken only
/// as GETs read old verifications from SQLite; since the copies answer the
/// polls after the first, each worker's SQLite page cache is kept small
/// (`PAGE_CACHE_KIB` in `dialproof_storage`).
pub const REREAD_BYTES_MAX: usize =
    SHARDS * 2 * (GENERATION_SLOTS * SLOT_BYTES + GENERATION_TEXT_BYTES);

/// One pending, live verification.
#[derive(Clone, Copy, Debug)]
struct Record {
    key: VerificationKey,
    phone: PackedNumber,
    dial_number: PackedNumber,
    ttl_seconds: u32,
    company: u32,
    /// Where its texts start in the shard's text ([`NO_TEXT`]: none): two
    /// little-endian `u16` lengths, then `client_ref`, then `info`.
    text: u32,
    /// Taken out (its status changed); swept later.
    gone: bool,
}

#[derive(Default)]
struct Shard {
    /// Sorted by key.
    records: VecDeque<Record>,
    text: Vec<u8>,
    /// Records marked gone and not swept yet.
    gone: usize,
    /// Bytes of `text` no held record points to.
    text_dead: usize,
    /// Pending verifications a GET read from SQLite (see the module doc).
    young: Generation,
    old: Generation,
    /// Changes of status applied to any of this shard's keys.
    changes: u64,
}

/// One generation of copies read from SQLite: a copy's record (its key
/// being the map's) and the texts its records point to.
#[derive(Default)]
struct Generation {
    /// Hashed by multiplying (only ids of existing verifications are
    /// held; no client chooses them), mixed differently from the shard
    /// index, which takes the top bits of the same random half.
    copies: HashMap<VerificationKey, CopyRecord, BuildWordHasher>,
    text: Vec<u8>,
}

/// A [`Record`] without its key (the map holds it), and nothing to mark:
/// a copy that ends is removed from the map. 32 bytes.
#[derive(Clone, Copy, Debug)]
struct CopyRecord {
    phone: PackedNumber,
    dial_number: PackedNumber,
    ttl_seconds: u32,
    company: u32,
    text: u32,
}

impl CopyRecord {
    /// `record` without its key, its texts at `text` in a generation's.
    fn of(record: &Record, text: u32) -> Self {
        CopyRecord {
            phone: record.phone,
            dial_number: record.dial_number,
            ttl_seconds: record.ttl_seconds,
            company: record.company,
            text,
        }
    }

    /// The record again, with its key.
    fn record(self, key: VerificationKey) -> Record {
        Record {
            key,
            phone: self.phone,
            dial_number: self.dial_number,
            ttl_seconds: self.ttl_seconds,
            company: self.company,
            text: self.text,
            gone: false,
        }
    }
}

/// A pending verification as read from SQLite, packed as held rows are,
/// with its own texts: what a GET offers back with [`HeldRows::keep_read`].
pub struct HeldCopy {
    record: Record,
    client_ref: Box<str>,
    info: Box<str>,
}

impl HeldCopy {
    /// `view` (verification `key`, read for `owner`) packed, when it is
    /// pending, live and of the packed shape.
    pub fn of(key: VerificationKey, owner: Owner, view: &VerificationView<'_>) -> Option<Self> {
        Some(HeldCopy {
            record: pack(key, owner.company_id, view)?,
            client_ref: view.client_ref.into(),
            info: view.info.into(),
        })
    }
}

/// The count of changes of a shard when a GET began to read SQLite; see
/// [`HeldRows::keep_read`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadMark(u64);

/// The held rows; see the module doc.
pub struct HeldRows {
    shards: [RwLock<Shard>; SHARDS],
    shard_bytes_max: usize,
}

impl Default for HeldRows {
    fn default() -> Self {
        HeldRows::with_bytes(HELD_BYTES_MAX)
    }
}

impl HeldRows {
    /// Rows within `bytes_max` in all (tests use a small bound).
    pub fn with_bytes(bytes_max: usize) -> Self {
        HeldRows {
            shards: std::array::from_fn(|_| RwLock::default()),
            shard_bytes_max: bytes_max / SHARDS,
        }
    }

    fn shard(&self, key: VerificationKey) -> &RwLock<Shard> {
        // Mixed, so that keys whose random bits share a pattern still
        // spread; the shift keeps the index below SHARDS (16 = 2^4).
        let mixed = key.random_bits().wrapping_mul(0x9e37_79b9_7f4a_7c15);
        &self.shards[(mixed >> 60) as usize]
    }

    /// A committed create (`key` is its id, which the commit consumer has
    /// parsed already): held if it is pending, live and of the packed
    /// shape; otherwise left to SQLite.
    pub fn created(&self, key: VerificationKey, row: &VerificationRow) {
        let Some(record) = pack(key, row.company_id, &row.view()) else {
            return;
        };
        let needs = std::mem::size_of::<Record>() + text_bytes(&row.client_ref, &row.info);
        let mut shard = self.shard(record.key).write();
        // Room first, so the records never outgrow the capacity reserved.
        shard.shrink_to(self.shard_bytes_max.saturating_sub(needs));
        shard.insert(record, &row.client_ref, &row.info, self.shard_bytes_max);
    }

    /// A committed change of status of verification `id`: no longer held.
    pub fn ended(&self, id: &str) {
        if let Some(key) = VerificationKey::parse(id) {
            let mut shard = self.shard(key).write();
            shard.take_out(key);
            // Its texts' bytes stay in the generation until it is emptied.
            shard.young.copies.remove(&key);
            shard.old.copies.remove(&key);
            shard.changes += 1;
        }
    }

    /// To be taken before a GET of `key` reads SQLite, for
    /// [`HeldRows::keep_read`].
    pub fn read_mark(&self, key: VerificationKey) -> ReadMark {
        ReadMark(self.shard(key).read().changes)
    }

    /// Keeps `copy`, read from SQLite after `mark` was taken, unless a
    /// change of status reached its shard since (then it may be older than
    /// what the commit consumer has applied). The young generation takes
    /// it; a full one becomes the old one, whose copies leave.
    pub fn keep_read(&self, copy: HeldCopy, mark: ReadMark) {
        let key = copy.record.key;
        let mut guard = self.shard(key).write();
        let shard = &mut *guard;
        if shard.changes != mark.0 || shard.has_copy(key) {
            return;
        }
        if !shard
            .young
            .has_room(text_bytes(&copy.client_ref, &copy.info))
        {
            shard.old.empty();
            std::mem::swap(&mut shard.young, &mut shard.old);
        }
        shard.young.keep(copy);
    }

    /// Renders verification `key` with `render` if it is held for `owner`.
    pub fn render<T>(
        &self,
        key: VerificationKey,
        owner: Owner,
        render: impl FnOnce(VerificationView<'_>) -> T,
    ) -> Option<T> {
        if !owner.livemode {
            return None;
        }
        let shard = self.shard(key).read();
        let (record, (client_ref, info)) = match shard.find(key) {
            Some(record) => (*record, shard.texts(record)),
            None => shard.copy_of(key)?,
        };
        if i64::from(record.company) != owner.company_id {
            return None;
        }
        let mut id = [0u8; VERIFICATION_ID_LEN];
        let (mut phone, mut dial_number) = ([0u8; 16], [0u8; 16]);
        let created_at = key.issued_at();
        Some(render(VerificationView {
            id: key.write_id(&mut id),
            phone: record.phone.write(&mut phone),
            dial_number: record.dial_number.write(&mut dial_number),
            client_ref,
            info,
            status: Status::Pending,
            ttl_seconds: record.ttl_seconds,
            created_at,
            expires_at: created_at.plus_seconds(record.ttl_seconds),
            completed_at: None,
            caller_id: "",
            caller_evidence: None,
            livemode: true,
        }))
    }

    /// Verifications held (taken-out records not counted), those read
    /// again from SQLite included.
    pub fn count(&self) -> usize {
        let records: usize = self
            .shards
            .iter()
            .map(|s| {
                let s = s.read();
                s.records.len() - s.gone
            })
            .sum();
        records + self.copies()
    }

    /// Of [`HeldRows::count`], the copies read from SQLite.
    pub fn copies(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.read();
                s.young.copies.len() + s.old.copies.len()
            })
            .sum()
    }
}

/// `row` (of company `company_id`) as a record, when it is pending, live
/// and every field it shows can be rebuilt exactly from the record.
fn pack(key: VerificationKey, company_id: i64, row: &VerificationView<'_>) -> Option<Record> {
    let plain = row.livemode
        && row.status == Status::Pending
        && row.completed_at.is_none()
        && row.caller_id.is_empty()
        && row.caller_evidence.is_none()
        && key.issued_at() == row.created_at
        && row.created_at.plus_seconds(row.ttl_seconds) == row.expires_at
        && row.client_ref.len() <= usize::from(u16::MAX)
        && row.info.len() <= usize::from(u16::MAX);
    if !plain {
        return None;
    }
    Some(Record {
        key,
        phone: PackedNumber::parse(row.phone)?,
        dial_number: PackedNumber::parse(row.dial_number)?,
        ttl_seconds: row.ttl_seconds,
        company: u32::try_from(company_id).ok()?,
        text: NO_TEXT,
        gone: false,
    })
}

/// Bytes a record's texts take in its shard's text.
fn text_bytes(client_ref: &str, info: &str) -> usize {
    match (client_ref.len(), info.len()) {
        (0, 0) => 0,
        (r, i) => 4 + r + i,
    }
}

/// Appends a record's texts to `text`; `None` if their offset would not
/// fit the record's `u32` (never within the shard's bound: the row is
/// then simply not held).
fn add_text(text: &mut Vec<u8>, client_ref: &str, info: &str) -> Option<u32> {
    if text_bytes(client_ref, info) == 0 {
        return Some(NO_TEXT);
    }
    let at = u32::try_from(text.len()).ok().filter(|at| *at != NO_TEXT)?;
    // Both lengths were checked against u16::MAX by `pack`.
    text.extend_from_slice(&(client_ref.len() as u16).to_le_bytes());
    text.extend_from_slice(&(info.len() as u16).to_le_bytes());
    text.extend_from_slice(client_ref.as_bytes());
    text.extend_from_slice(info.as_bytes());
    Some(at)
}

/// The texts a record whose `text` is `at` points to in `text`.
fn texts_at(text: &[u8], at: u32) -> (&str, &str) {
    if at == NO_TEXT {
        return ("", "");
    }
    let at = at as usize;
    let (ref_len, info_len) = text_lens(text, at);
    let ref_at = at + 4;
    let info_at = ref_at + ref_len;
    // Written from two `&str`s at these offsets, so both are UTF-8.
    let read =
        |from: usize, n: usize| std::str::from_utf8(&text[from..from + n]).unwrap_or_default();
    (read(ref_at, ref_len), read(info_at, info_len))
}

impl Generation {
    /// Whether one more copy with `text_needs` bytes of texts fits.
    fn has_room(&self, text_needs: usize) -> bool {
        self.copies.len() < GENERATION_COPIES
            && self.text.len() + text_needs <= GENERATION_TEXT_BYTES
    }

    fn keep(&mut self, copy: HeldCopy) {
        if self.copies.capacity() == 0 {
            // Once, to the most it holds: the map never grows by doubling
            // (which would hold its old and new slots at once).
            self.copies.reserve(GENERATION_COPIES);
            self.text.reserve_exact(GENERATION_TEXT_BYTES);
        }
        let Some(text) = add_text(&mut self.text, &copy.client_ref, &copy.info) else {
            return;
        };
        self.copies
            .insert(copy.record.key, CopyRecord::of(&copy.record, text));
    }

    /// Drops every copy; the map's slots and the text's bytes stay
    /// allocated for the next copies.
    fn empty(&mut self) {
        self.copies.clear();
        self.text.clear();
    }
}

/// The two lengths at the start of a record's texts at `at`.
fn text_lens(text: &[u8], at: usize) -> (usize, usize) {
    let len = |i: usize| usize::from(u16::from_le_bytes([text[i], text[i + 1]]));
    (len(at), len(at + 2))
}

impl Shard {
    /// Where `key` is among the sorted records (`Err`: where it would go).
    /// Guided by the key's time: keys are issued in time order at a fairly
    /// steady rate, so the place a key's time takes between the first and
    /// the last key's is close to its index. Why: over 150,000 held
    /// verifications a plain binary search was a tenth of the server's CPU
    /// per GET (14 dependent probes, most of them cache misses; `perf` of
    /// `tools/read-ab.sh`).
    fn position(&self, key: VerificationKey) -> Result<usize, usize> {
        let records = &self.records;
        guided_search::position(records.len(), |i| records[i].key, key, |k| k.high_bits())
    }

    fn find(&self, key: VerificationKey) -> Option<&Record> {
        let at = self.position(key).ok()?;
        let record = &self.records[at];
        (!record.gone).then_some(record)
    }

    fn insert(&mut self, mut record: Record, client_ref: &str, info: &str, bytes_max: usize) {
        if self.records.capacity() == 0 {
            // Once, to the most the bound lets it hold: the records never
            // move (a doubling would hold the old and the new copy at once).
            self.records
                .reserve_exact(bytes_max / std::mem::size_of::<Record>());
        }
        let Some(text) = self.add_text(client_ref, info) else {
            return;
        };
        record.text = text;
        match self.position(record.key) {
            // The consumer applies each create once; a repeat replaces.
            Ok(at) => {
                let old = std::mem::replace(&mut self.records[at], record);
                if old.gone {
                    self.gone -= 1;
                } else {
                    self.forget(&old);
                }
            }
            Err(at) => self.records.insert(at, record),
        }
    }

    fn add_text(&mut self, client_ref: &str, info: &str) -> Option<u32> {
        add_text(&mut self.text, client_ref, info)
    }

    fn text_len(&self, record: &Record) -> usize {
        let (client_ref, info) = self.texts(record);
        text_bytes(client_ref, info)
    }

    fn texts(&self, record: &Record) -> (&str, &str) {
        texts_at(&self.text, record.text)
    }

    /// The copy read from SQLite of `key`, as a record and its texts.
    fn copy_of(&self, key: VerificationKey) -> Option<(Record, (&str, &str))> {
        let (generation, copy) = [&self.young, &self.old]
            .into_iter()
            .find_map(|g| Some((g, g.copies.get(&key)?)))?;
        Some((copy.record(key), texts_at(&generation.text, copy.text)))
    }

    fn has_copy(&self, key: VerificationKey) -> bool {
        self.young.copies.contains_key(&key) || self.old.copies.contains_key(&key)
    }

    /// A record no longer points to its text.
    fn forget(&mut self, record: &Record) {
        self.text_dead += self.text_len(record);
    }

    fn take_out(&mut self, key: VerificationKey) {
        let Ok(at) = self.position(key) else {
            return;
        };
        if self.records[at].gone {
            return;
        }
        self.records[at].gone = true;
        self.gone += 1;
        let record = self.records[at];
        self.forget(&record);
        if self.gone > 64 && self.gone * 4 > self.records.len() {
            self.records.retain(|r| !r.gone);
            self.gone = 0;
        }
        self.sweep_text();
    }

    fn bytes(&self) -> usize {
        self.records.len() * std::mem::size_of::<Record>() + self.text.len() - self.text_dead
    }

    /// Drops the oldest records until the shard is within `bytes_max`.
    fn shrink_to(&mut self, bytes_max: usize) {
        while self.bytes() > bytes_max {
            let Some(oldest) = self.records.pop_front() else {
                break;
            };
            if oldest.gone {
                self.gone -= 1;
            } else {
                self.forget(&oldest);
            }
        }
        self.sweep_text();
    }

    /// Rewrites the text without the bytes no record points to, once they
    /// are half of it.
    fn sweep_text(&mut self) {
        if self.text.len() < TEXT_SWEEP_MIN || self.text_dead * 2 < self.text.len() {
            return;
        }
        let old = std::mem::take(&mut self.text);
        let mut text = Vec::with_capacity(old.len() - self.text_dead);
        for record in self.records.iter_mut() {
            if record.text == NO_TEXT || record.gone {
                record.text = NO_TEXT;
                continue;
            }
            let at = record.text as usize;
            let (ref_len, info_len) = text_lens(&old, at);
            let end = at + 4 + ref_len + info_len;
            // Within u32: the new text is shorter than the old one.
            record.text = text.len() as u32;
            text.extend_from_slice(&old[at..end]);
        }
        self.text = text;
        self.text_dead = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialproof_engine::pool::Pool;
    use dialproof_engine::time::UnixMillis;

    const T0: i64 = 1_790_000_000_000;

    fn row(n: u64, client_ref: &str, info: &str) -> VerificationRow {
        let created_at = UnixMillis(T0 + n as i64);
        let key = VerificationKey::new(created_at, u128::from(n) * 0x9e37_79b9_7f4a_7c15);
        VerificationRow {
            id: key.id().as_str().to_owned(),
            company_id: 7,
            api_key_id: 3,
            phone: format!("+4915{:09}", n),
            dial_number: "+12125550100".into(),
            pool: Pool::International,
            client_ref: client_ref.into(),
            info: info.into(),
            webhook_url: "https://example.test/hook".into(),
            ttl_seconds: 300,
            status: Status::Pending,
            created_at,
            expires_at: created_at.plus_seconds(300),
            completed_at: None,
            caller_id: String::new(),
            caller_evidence: None,
            lease_generation: 1,
            failure_reason: None,
            idempotency_key: None,
            livemode: true,
        }
    }

    fn key(row: &VerificationRow) -> VerificationKey {
        VerificationKey::parse(&row.id).unwrap()
    }

    /// The held view of `row` equals the row's own, field by field.
    fn shows_as_itself(held: &HeldRows, row: &VerificationRow) -> bool {
        held.render(key(row), row.owner(), |v| v == row.view())
            .unwrap_or(false)
    }

    #[test]
    fn a_held_row_shows_exactly_what_the_row_shows() {
        let held = HeldRows::default();
        let rows = [
            row(1, "", ""),
            row(2, "order-42", ""),
            row(3, "", "Ünïcode ✓ and \"quotes\""),
            row(4, &"r".repeat(120), &"é".repeat(500)),
        ];
        for r in &rows {
            held.created(key(r), r);
        }
        assert_eq!(held.count(), rows.len());
        for r in &rows {
            assert!(shows_as_itself(&held, r), "{}", r.id);
        }
    }

    #[test]
    fn only_pending_live_rows_of_the_packed_shape_are_held() {
        let held = HeldRows::default();
        let mut test_mode = row(1, "", "");
        test_mode.livemode = false;
        let mut ended = row(2, "", "");
        ended.status = Status::Expired;
        let mut odd_phone = row(3, "", "");
        odd_phone.phone = "+7 916".into();
        let mut long_phone = row(4, "", "");
        long_phone.phone = "+1234567890123456".into();
        let mut other_moment = row(5, "", "");
        other_moment.created_at = UnixMillis(T0 - 1);
        other_moment.expires_at = other_moment.created_at.plus_seconds(300);
        let mut other_expiry = row(6, "", "");
        other_expiry.expires_at = UnixMillis(other_expiry.expires_at.0 + 1);
        for r in [
            &test_mode,
            &ended,
            &odd_phone,
            &long_phone,
            &other_moment,
            &other_expiry,
        ] {
            held.created(key(r), r);
            assert!(
                held.render(key(r), r.owner(), |_| ()).is_none(),
                "{} was held",
                r.id
            );
        }
        assert_eq!(held.count(), 0);
    }

    #[test]
    fn another_companys_row_and_an_ended_one_are_not_found() {
        let held = HeldRows::default();
        let a = row(1, "a", "");
        held.created(key(&a), &a);
        assert!(held.render(key(&a), Owner::from(8), |_| ()).is_none());
        let test_owner = Owner {
            company_id: 7,
            livemode: false,
        };
        assert!(held.render(key(&a), test_owner, |_| ()).is_none());
        assert!(shows_as_itself(&held, &a));
        held.ended(&a.id);
        held.ended(&a.id);
        assert!(held.render(key(&a), a.owner(), |_| ()).is_none());
        assert_eq!(held.count(), 0);
        // Applied again (a repeat) it is held again, once.
        held.created(key(&a), &a);
        assert_eq!(held.count(), 1);
        assert!(shows_as_itself(&held, &a));
    }

    /// What a GET does when SQLite answered: the mark first, then the copy.
    fn read_from_sqlite(held: &HeldRows, r: &VerificationRow) {
        let mark = held.read_mark(key(r));
        let copy = HeldCopy::of(key(r), r.owner(), &r.view()).expect("pending and plain");
        held.keep_read(copy, mark);
    }

    #[test]
    fn a_row_read_from_sqlite_is_held_until_it_ends() {
        let held = HeldRows::default();
        let r = row(1, "order-7", "Ünïcode");
        assert!(held.render(key(&r), r.owner(), |_| ()).is_none());
        read_from_sqlite(&held, &r);
        assert!(shows_as_itself(&held, &r));
        assert_eq!(held.count(), 1);
        assert!(held.render(key(&r), Owner::from(8), |_| ()).is_none());
        held.ended(&r.id);
        assert!(held.render(key(&r), r.owner(), |_| ()).is_none());
        assert_eq!(held.count(), 0);
    }

    /// A change applied between the GET's mark and its copy may be newer
    /// than what the GET read: the copy must not be kept.
    #[test]
    fn a_copy_read_across_a_change_of_status_is_refused() {
        let held = HeldRows::default();
        let r = row(1, "", "");
        let mark = held.read_mark(key(&r));
        let copy = HeldCopy::of(key(&r), r.owner(), &r.view()).unwrap();
        held.ended(&r.id);
        held.keep_read(copy, mark);
        assert!(
            held.render(key(&r), r.owner(), |_| ()).is_none(),
            "a copy older than a change of status was kept"
        );
        // Read again after the change (still pending in this test's row):
        // kept.
        read_from_sqlite(&held, &r);
        assert!(shows_as_itself(&held, &r));
    }

    #[test]
    fn only_pending_live_plain_views_are_copied() {
        let mut ended = row(1, "", "");
        ended.status = Status::Completed;
        let mut test_mode = row(2, "", "");
        test_mode.livemode = false;
        for r in [&ended, &test_mode] {
            assert!(
                HeldCopy::of(key(r), r.owner(), &r.view()).is_none(),
                "{}",
                r.id
            );
        }
    }

    /// Rows (`client_ref` `r`, no info) whose keys fall in shard 0.
    fn rows_of_shard_0(held: &HeldRows) -> impl Iterator<Item = VerificationRow> + '_ {
        (0u64..)
            .map(|n| row(n, "r", ""))
            .filter(|r| std::ptr::eq(held.shard(key(r)), &held.shards[0]))
    }

    #[test]
    fn copies_read_again_are_bounded_and_leave_a_generation_at_a_time() {
        let held = HeldRows::default();
        let rows: Vec<_> = rows_of_shard_0(&held)
            .take(2 * GENERATION_COPIES + 1)
            .collect();
        for r in &rows[..2 * GENERATION_COPIES] {
            read_from_sqlite(&held, r);
            // Read twice: kept once.
            read_from_sqlite(&held, r);
        }
        assert_eq!(held.count(), 2 * GENERATION_COPIES, "both generations full");
        assert!(rows[..2 * GENERATION_COPIES]
            .iter()
            .all(|r| shows_as_itself(&held, r)));
        // One more: the first generation leaves, the second and the new
        // copy stay.
        read_from_sqlite(&held, &rows[2 * GENERATION_COPIES]);
        assert_eq!(held.count(), GENERATION_COPIES + 1);
        assert!(rows[..GENERATION_COPIES]
            .iter()
            .all(|r| held.render(key(r), r.owner(), |_| ()).is_none()));
        assert!(rows[GENERATION_COPIES..]
            .iter()
            .all(|r| shows_as_itself(&held, r)));
        let shard = held.shards[0].read();
        for g in [&shard.young, &shard.old] {
            assert!(
                g.copies.capacity() <= GENERATION_COPIES,
                "a generation grew past its slots: {}",
                g.copies.capacity()
            );
        }
    }

    #[test]
    fn a_working_set_of_150_000_read_once_is_answered_from_memory() {
        // What a busy client base polls; before the copies were kept in
        // generations, 4,096 of them were (256 a shard).
        let held = HeldRows::default();
        let rows: Vec<_> = (0..150_000u64).map(|n| row(n, "order", "")).collect();
        for r in &rows {
            read_from_sqlite(&held, r);
        }
        let answered = rows
            .iter()
            .filter(|r| held.render(key(r), r.owner(), |_| ()).is_some())
            .count();
        assert_eq!(answered, rows.len(), "copies held of the working set");
        assert!(rows.iter().step_by(97).all(|r| shows_as_itself(&held, r)));
    }

    #[test]
    fn long_texts_fill_a_generation_by_their_bytes() {
        let held = HeldRows::default();
        let info = "i".repeat(10_000);
        let rows: Vec<_> = rows_of_shard_0(&held)
            .take(100)
            .map(|r| VerificationRow {
                info: info.clone(),
                ..r
            })
            .collect();
        for r in &rows {
            read_from_sqlite(&held, r);
            let shard = held.shards[0].read();
            for g in [&shard.young, &shard.old] {
                assert!(g.text.len() <= GENERATION_TEXT_BYTES, "{}", g.text.len());
            }
        }
        // 10,004 bytes a copy: 19 fit a generation, so the last 19 to 38
        // are held, the newest among them.
        let held_now = held.count();
        assert!((19..=38).contains(&held_now), "{held_now} held");
        assert!(shows_as_itself(&held, &rows[99]));
        assert!(held
            .render(key(&rows[0]), rows[0].owner(), |_| ())
            .is_none());
        // The longest texts a copy can have fit a generation; longer ones
        // are not copied (`pack` refuses them).
        let huge = VerificationRow {
            info: "x".repeat(u16::MAX as usize),
            client_ref: "y".repeat(u16::MAX as usize),
            ..row(1_000_000, "", "")
        };
        let too_long = VerificationRow {
            info: "z".repeat(GENERATION_TEXT_BYTES),
            ..huge.clone()
        };
        assert!(HeldCopy::of(key(&too_long), too_long.owner(), &too_long.view()).is_none());
        read_from_sqlite(&held, &huge);
        assert!(shows_as_itself(&held, &huge));
    }

    #[test]
    fn a_copy_that_ended_is_gone_and_leaves_its_room() {
        // Clients poll until a verification ends, so copies end all the
        // time; each must free its place in its generation, or ended
        // copies fill it and push live ones out early.
        let held = HeldRows::default();
        let mut rows = rows_of_shard_0(&held);
        // One generation's worth: all in the young one.
        let kept: Vec<_> = rows.by_ref().take(GENERATION_COPIES).collect();
        for r in &kept {
            read_from_sqlite(&held, r);
        }
        for r in &kept[1..GENERATION_COPIES / 2] {
            held.ended(&r.id);
            assert!(
                held.render(key(r), r.owner(), |_| ()).is_none(),
                "{} ended but held",
                r.id
            );
        }
        let later: Vec<_> = rows.take(GENERATION_COPIES / 2 - 1).collect();
        for r in &later {
            read_from_sqlite(&held, r);
        }
        assert_eq!(held.count(), GENERATION_COPIES, "the shard's copies");
        assert!(
            shows_as_itself(&held, &kept[0]),
            "the first copy was pushed out while ended copies' places were free"
        );
        assert!(later.iter().all(|r| shows_as_itself(&held, r)));
    }

    #[test]
    fn the_guessing_search_finds_what_a_binary_search_finds() {
        // Keys in bursts (many in one millisecond, some sharing their high
        // half), gaps of seconds, and a skew, each present or absent.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut keys = Vec::new();
        let mut at = T0;
        for i in 0..3_000u64 {
            at += match i % 100 {
                0 => 5_000,
                1..=30 => 0,
                _ => (next() % 7) as i64,
            };
            let random = u128::from(next()) << 16 | u128::from(next() % 4);
            keys.push(VerificationKey::new(UnixMillis(at), random));
        }
        keys.sort();
        keys.dedup();
        let (held, absent): (Vec<_>, Vec<_>) =
            keys.iter().enumerate().partition(|(i, _)| i % 3 != 0);
        let mut shard = Shard::default();
        let base = row(1, "", "");
        let base_key = VerificationKey::parse(&base.id).unwrap();
        for (_, key) in &held {
            let record = pack(base_key, base.company_id, &base.view())
                .map(|r| Record { key: **key, ..r })
                .unwrap();
            shard.records.push_back(record);
        }
        let sorted: Vec<_> = shard.records.iter().map(|r| r.key).collect();
        for (_, key) in held.iter().chain(absent.iter()) {
            assert_eq!(shard.position(**key), sorted.binary_search(key), "{key:?}");
        }
        let earliest = VerificationKey::new(UnixMillis(T0 - 1), 0);
        let latest = VerificationKey::new(UnixMillis(at + 1), 0);
        assert_eq!(shard.position(earliest), Err(0));
        assert_eq!(shard.position(latest), Err(sorted.len()));
    }

    #[test]
    fn the_oldest_go_first_past_the_bound_and_texts_survive_the_sweeps() {
        // Small enough that each shard holds a few hundred records.
        let held = HeldRows::with_bytes(16 * 300 * 64);
        let rows: Vec<_> = (0..20_000u64)
            .map(|n| {
                row(
                    n,
                    &format!("ref-{n}"),
                    if n % 3 == 0 { "some info" } else { "" },
                )
            })
            .collect();
        for (n, r) in rows.iter().enumerate() {
            held.created(key(r), r);
            // Most end while held, as most verifications do.
            if n % 4 != 0 {
                held.ended(&r.id);
            }
        }
        let kept = held.count();
        assert!(kept > 16 * 100, "only {kept} held");
        let per_shard = held.shard_bytes_max / std::mem::size_of::<Record>();
        for shard in &held.shards {
            let shard = shard.read();
            assert!(shard.bytes() <= held.shard_bytes_max, "{}", shard.bytes());
            assert_eq!(shard.records.capacity(), per_shard, "the records moved");
        }
        // The newest still pending ones are held and show as themselves;
        // the oldest were dropped; ended ones are gone.
        for (n, r) in rows.iter().enumerate().rev().take(400) {
            let found = held.render(key(r), r.owner(), |v| v == r.view());
            match n % 4 {
                0 => assert_eq!(found, Some(true), "{n} not held as itself"),
                _ => assert_eq!(found, None, "{n} ended but held"),
            }
        }
        assert!(held
            .render(key(&rows[0]), rows[0].owner(), |_| ())
            .is_none());
    }
}
