//! What the load generator sends: the operation mix, the bytes of each
//! request, and the verification ids that reads and cancels act on.
//!
//! Each event-loop thread owns a [`Planner`]; keys are used in turn, and
//! each key remembers the ids it created (a key's company sees only its
//! own verifications). A read takes a random remembered id; a cancel takes
//! the oldest pending one that no call was placed to (so the mix also
//! frees numbers), else repeats the cancel of one it already cancelled (a
//! repeated cancel is safe and answers 200). A verification being called is
//! never cancelled, so a cancel cannot race its call. With no id to use, a
//! read or cancel becomes a create, counted as substituted.
//!
//! Not for: sockets or timing (see [`super::worker`]).

use anyhow::{bail, Context, Result};
use std::collections::VecDeque;
use std::sync::Arc;

/// Ids remembered per key for reads unless `--working-set` says more.
pub const KNOWN_IDS_DEFAULT: usize = 1024;
/// The largest `--working-set` (ids per key; 32 bytes each).
pub const WORKING_SET_MAX: usize = 10_000_000;
/// The largest `--zipf` exponent.
pub const ZIPF_MAX: f64 = 4.0;
/// Pending ids remembered per key for cancels (older ones expire by TTL).
pub const PENDING_IDS_MAX: usize = 4096;
/// Cancelled ids remembered per key for repeated cancels.
pub const CANCELLED_IDS_MAX: usize = 256;
/// Keyed creates remembered per key for deliberate replays.
pub const REPLAYABLE_MAX: usize = 256;

/// One kind of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Create,
    Read,
    Cancel,
    /// A plain GET of `--path` without a key (a probe of the HTTP layer).
    Get,
    /// A create sent again with its `Idempotency-Key` and body, byte for
    /// byte (`--replay-share`): a success is the first create's 201,
    /// replayed.
    Replay,
}

impl Op {
    /// The operations a mix weighs.
    pub const ALL: [Op; 4] = [Op::Create, Op::Read, Op::Cancel, Op::Get];
    /// Every operation the statistics count.
    pub const COUNTED: [Op; 5] = [Op::Create, Op::Read, Op::Cancel, Op::Get, Op::Replay];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Read => "read",
            Op::Cancel => "cancel",
            Op::Get => "get",
            Op::Replay => "replay",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether an HTTP status is this operation's success.
    pub fn is_success(self, status: u16) -> bool {
        match self {
            Op::Create | Op::Replay => status == 201,
            Op::Read | Op::Cancel => status == 200,
            // A probe: any answer the server did not fail on.
            Op::Get => status < 500,
        }
    }
}

/// Relative weights of the operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    weights: [u32; 4],
    total: u32,
}

impl Mix {
    /// `create=1,read=8,cancel=1` (any subset; weights are integers).
    pub fn parse(spec: &str) -> Result<Mix> {
        let mut weights = [0u32; 4];
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .with_context(|| format!("mix entry {part:?} is not NAME=WEIGHT"))?;
            let op = Op::ALL
                .into_iter()
                .find(|o| o.as_str() == name.trim())
                .with_context(|| {
                    format!("unknown operation {name:?} (create, read, cancel, get)")
                })?;
            let w: u32 = weight
                .trim()
                .parse()
                .ok()
                .filter(|w| *w <= 1_000_000)
                .with_context(|| format!("weight {weight:?} is not an integer 0..=1000000"))?;
            weights[op.index()] = w;
        }
        let total = weights.iter().sum();
        if total == 0 {
            bail!("the mix {spec:?} has no operation with a weight above 0");
        }
        Ok(Mix { weights, total })
    }

    /// The operation for a uniform random `r`.
    pub fn pick(&self, r: u64) -> Op {
        let mut x = (r % u64::from(self.total)) as u32;
        for op in Op::ALL {
            if x < self.weights[op.index()] {
                return op;
            }
            x -= self.weights[op.index()];
        }
        Op::Get
    }

    pub fn weight(&self, op: Op) -> u32 {
        self.weights[op.index()]
    }

    pub fn needs_keys(&self) -> bool {
        [Op::Create, Op::Read, Op::Cancel]
            .iter()
            .any(|o| self.weight(*o) > 0)
    }

    pub fn has_create(&self) -> bool {
        self.weight(Op::Create) > 0
    }
}

/// xorshift64*: fast, good enough to pick operations and ids.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// What every planner of a run shares.
#[derive(Debug)]
pub struct Shared {
    pub mix: Mix,
    /// `host[:port]` for the Host header.
    pub host: String,
    /// API tokens (may be empty when the mix is `get` only).
    pub tokens: Vec<String>,
    pub phone: String,
    pub webhook_url: String,
    pub ttl_seconds: u32,
    pub get_path: String,
    /// Creates carry an `Idempotency-Key`, unique per create within a run
    /// (`--idempotency-keys`); `None` sends none.
    pub idempotency_keys: Option<KeyPrefix>,
    /// The share of creates that repeat an earlier keyed create instead
    /// (`--replay-share`, 0..=1).
    pub replay_share: f64,
    /// Ids remembered per key (and per thread) for reads: the working set
    /// a read picks from (`--working-set`).
    pub working_set: usize,
    /// How reads favour recent ids (`--zipf`): 0 picks uniformly, `s` > 0
    /// picks the id of recency rank r (0 = newest) with a probability
    /// close to 1/(r+1)^s, as clients poll what they just created.
    pub zipf: f64,
}

/// What makes a run's idempotency keys unique: `load-<run>-<thread>-<seq>`,
/// with `run` from the start time, so two runs against one database never
/// share a key.
#[derive(Debug, Clone)]
pub struct KeyPrefix(pub String);

/// A request ready to send.
#[derive(Debug)]
pub struct Planned {
    pub op: Op,
    pub key: usize,
    pub bytes: Vec<u8>,
    /// A read or cancel that became a create for want of ids.
    pub substituted: bool,
    /// A replay: the verification id its first create got.
    pub replay_of: Option<String>,
}

#[derive(Debug, Default)]
struct Ids {
    /// Pending and not called: the ones a cancel may end.
    pending: VecDeque<String>,
    known: Vec<String>,
    known_next: usize,
    cancelled: Vec<String>,
    cancelled_next: usize,
    /// Keyed creates answered 201: (verification id, request bytes).
    replayable: Vec<(String, Vec<u8>)>,
    replayable_next: usize,
}

/// Adds to a bounded ring: appends while there is room, else overwrites
/// the oldest.
fn remember<T>(ring: &mut Vec<T>, next: &mut usize, max: usize, id: T) {
    if ring.len() < max {
        ring.push(id);
    } else {
        let slot = *next % max;
        ring[slot] = id;
        *next = slot + 1;
    }
}

/// The recency rank (0 = newest, below `n`) for a uniform `unit` in
/// [0, 1): the inverse of the continuous power law with exponent `s` on
/// [1, n+1), a close and cheap stand-in for Zipf's discrete law (no table
/// of n weights for a working set of millions).
pub fn zipf_rank(n: usize, s: f64, unit: f64) -> usize {
    let top = (n + 1) as f64;
    let x = if (s - 1.0).abs() < 1e-9 {
        top.powf(unit)
    } else {
        let e = 1.0 - s;
        ((top.powf(e) - 1.0) * unit + 1.0).powf(1.0 / e)
    };
    (x.floor() as usize).saturating_sub(1).min(n - 1)
}

/// One thread's request source.
#[derive(Debug)]
pub struct Planner {
    shared: Arc<Shared>,
    ids: Vec<Ids>,
    rng: Rng,
    next_key: usize,
    seq: u64,
    thread: usize,
    get_bytes: Vec<u8>,
    /// `--prefill`: every request is a create, whatever the mix.
    prefilling: bool,
}

impl Planner {
    pub fn new(shared: Arc<Shared>, thread: usize, seed: u64) -> Planner {
        let keys = shared.tokens.len();
        let get_bytes = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            shared.get_path, shared.host
        )
        .into_bytes();
        Planner {
            ids: (0..keys).map(|_| Ids::default()).collect(),
            rng: Rng::new(seed),
            next_key: thread % keys.max(1),
            seq: 0,
            thread,
            get_bytes,
            shared,
            prefilling: false,
        }
    }

    /// While on, [`Planner::next_request`] plans creates only (the
    /// `--prefill` phase that builds the read working set).
    pub fn set_prefilling(&mut self, on: bool) {
        self.prefilling = on;
    }

    pub fn is_prefilling(&self) -> bool {
        self.prefilling
    }

    /// The next request by the mix.
    pub fn next_request(&mut self) -> Planned {
        if self.prefilling && !self.shared.tokens.is_empty() {
            let key = self.next_key;
            self.next_key = (self.next_key + 1) % self.shared.tokens.len();
            return self.create_request(key);
        }
        let op = self.shared.mix.pick(self.rng.next_u64());
        if op == Op::Get || self.shared.tokens.is_empty() {
            return Planned {
                op: Op::Get,
                key: 0,
                bytes: self.get_bytes.clone(),
                substituted: false,
                replay_of: None,
            };
        }
        let key = self.next_key;
        self.next_key = (self.next_key + 1) % self.shared.tokens.len();
        let id = match op {
            Op::Read => self.known_id(key),
            Op::Cancel => self.cancel_id(key),
            _ => None,
        };
        if op == Op::Create && self.chance(self.shared.replay_share) {
            if let Some(replay) = self.replay_request(key) {
                return replay;
            }
        }
        match (op, id) {
            (Op::Read, Some(id)) => self.item_request(Op::Read, key, "GET", &id, ""),
            (Op::Cancel, Some(id)) => self.item_request(Op::Cancel, key, "POST", &id, "cancel/"),
            (op, _) => {
                let mut p = self.create_request(key);
                p.substituted = op != Op::Create;
                p
            }
        }
    }

    /// Remembers a created verification; `pending` ones may be cancelled.
    pub fn created(&mut self, key: usize, id: String, pending: bool) {
        let Some(ids) = self.ids.get_mut(key) else {
            return;
        };
        if pending {
            if ids.pending.len() >= PENDING_IDS_MAX {
                ids.pending.pop_front();
            }
            ids.pending.push_back(id.clone());
        }
        let max = self.shared.working_set;
        remember(&mut ids.known, &mut ids.known_next, max, id);
    }

    /// Remembers a keyed create answered 201, for replays: its id and the
    /// exact bytes it was sent with.
    pub fn created_keyed(&mut self, key: usize, id: String, request: Vec<u8>) {
        if let Some(ids) = self.ids.get_mut(key) {
            let (ring, next) = (&mut ids.replayable, &mut ids.replayable_next);
            remember(ring, next, REPLAYABLE_MAX, (id, request));
        }
    }

    /// Whether creates carry keys (the worker then keeps their bytes).
    pub fn keyed(&self) -> bool {
        self.shared.idempotency_keys.is_some()
    }

    fn replay_request(&mut self, key: usize) -> Option<Planned> {
        let n = self.ids[key].replayable.len();
        if n == 0 {
            return None;
        }
        let (id, bytes) = self.ids[key].replayable[self.rng.below(n)].clone();
        Some(Planned {
            op: Op::Replay,
            key,
            bytes,
            substituted: false,
            replay_of: Some(id),
        })
    }

    /// True with probability `p` (0..=1).
    pub fn chance(&mut self, p: f64) -> bool {
        let unit = (self.rng.next_u64() >> 11) as f64 / ((1u64 << 53) as f64);
        unit < p
    }

    fn known_id(&mut self, key: usize) -> Option<String> {
        let n = self.ids[key].known.len();
        if n == 0 {
            return None;
        }
        let slot = if self.shared.zipf > 0.0 {
            let unit = (self.rng.next_u64() >> 11) as f64 / ((1u64 << 53) as f64);
            let rank = zipf_rank(n, self.shared.zipf, unit);
            // The ring's newest entry sits just before `known_next` once
            // it is full, at the end before that.
            let ids = &self.ids[key];
            let newest = if n < self.shared.working_set {
                n - 1
            } else {
                (ids.known_next + n - 1) % n
            };
            (newest + n - rank) % n
        } else {
            self.rng.below(n)
        };
        Some(self.ids[key].known[slot].clone())
    }

    fn cancel_id(&mut self, key: usize) -> Option<String> {
        let ids = &mut self.ids[key];
        if let Some(id) = ids.pending.pop_front() {
            let copy = id.clone();
            remember(
                &mut ids.cancelled,
                &mut ids.cancelled_next,
                CANCELLED_IDS_MAX,
                copy,
            );
            return Some(id);
        }
        let n = ids.cancelled.len();
        (n > 0).then(|| self.ids[key].cancelled[self.rng.below(n)].clone())
    }

    fn auth(&self, key: usize) -> &str {
        &self.shared.tokens[key]
    }

    fn item_request(&self, op: Op, key: usize, method: &str, id: &str, tail: &str) -> Planned {
        let length = if method == "POST" {
            "Content-Length: 0\r\n"
        } else {
            ""
        };
        let bytes = format!(
            "{method} /api/v1/verifications/{id}/{tail} HTTP/1.1\r\nHost: {}\r\n\
             Authorization: Bearer {}\r\n{length}\r\n",
            self.shared.host,
            self.auth(key)
        )
        .into_bytes();
        Planned {
            op,
            key,
            bytes,
            substituted: false,
            replay_of: None,
        }
    }

    fn create_request(&mut self, key: usize) -> Planned {
        self.seq += 1;
        let s = &self.shared;
        let body = serde_json::json!({
            "phone": s.phone,
            "webhook_url": s.webhook_url,
            "ttl_seconds": s.ttl_seconds,
            "client_ref": format!("load-{}-{}", self.thread, self.seq),
        })
        .to_string();
        let idempotency = match &s.idempotency_keys {
            Some(prefix) => format!(
                "Idempotency-Key: {}-{}-{}\r\n",
                prefix.0, self.thread, self.seq
            ),
            None => String::new(),
        };
        let mut bytes = format!(
            "POST /api/v1/verifications/ HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\n{idempotency}Content-Length: {}\r\n\r\n",
            s.host,
            self.auth(key),
            body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        Planned {
            op: Op::Create,
            key,
            bytes,
            substituted: false,
            replay_of: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(mix: &str) -> Arc<Shared> {
        Arc::new(Shared {
            mix: Mix::parse(mix).unwrap(),
            host: "127.0.0.1:8443".into(),
            tokens: vec!["svc_live_aaaaaaaa_x".into(), "svc_live_bbbbbbbb_y".into()],
            phone: "+79123456789".into(),
            webhook_url: "http://127.0.0.1:9/hook".into(),
            ttl_seconds: 60,
            get_path: "/".into(),
            idempotency_keys: None,
            replay_share: 0.0,
            working_set: KNOWN_IDS_DEFAULT,
            zipf: 0.0,
        })
    }

    #[test]
    fn keyed_creates_get_unique_keys_and_replays_repeat_them_byte_for_byte() {
        let mut shared = Arc::try_unwrap(shared("create=1")).unwrap();
        // One key (token), so every create can replay the one remembered.
        shared.tokens.truncate(1);
        shared.idempotency_keys = Some(KeyPrefix("load-r1".into()));
        shared.replay_share = 0.5;
        let mut p = Planner::new(Arc::new(shared), 3, 9);
        assert_eq!(p.next_key, 0);
        let first = p.next_request();
        assert_eq!(first.op, Op::Create, "nothing to replay yet");
        let text = String::from_utf8(first.bytes.clone()).unwrap();
        assert!(
            text.contains("\r\nIdempotency-Key: load-r1-3-1\r\n"),
            "{text}"
        );
        let second = String::from_utf8(p.next_request().bytes).unwrap();
        assert!(
            second.contains("\r\nIdempotency-Key: load-r1-3-2\r\n"),
            "{second}"
        );
        p.created_keyed(first.key, "ver_X".into(), first.bytes.clone());
        let replays: Vec<Planned> = (0..200)
            .map(|_| p.next_request())
            .filter(|r| r.op == Op::Replay)
            .collect();
        assert!((60..140).contains(&replays.len()), "{}", replays.len());
        for r in replays {
            assert_eq!(r.replay_of.as_deref(), Some("ver_X"));
            assert_eq!(r.bytes, first.bytes);
        }
    }

    #[test]
    fn mix_parsing() {
        let m = Mix::parse("create=2, read=7 ,cancel=1").unwrap();
        assert_eq!(m.weight(Op::Read), 7);
        assert!(m.needs_keys() && m.has_create());
        assert!(!Mix::parse("get=1").unwrap().needs_keys());
        for bad in ["", "create=0", "write=1", "create", "create=-1", "read=x"] {
            assert!(Mix::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn picks_follow_the_weights() {
        let m = Mix::parse("create=1,read=3").unwrap();
        let mut rng = Rng::new(7);
        let reads = (0..40_000)
            .filter(|_| m.pick(rng.next_u64()) == Op::Read)
            .count();
        assert!((29_000..31_000).contains(&reads), "{reads}");
    }

    #[test]
    fn reads_and_cancels_wait_for_ids_then_use_them() {
        let mut p = Planner::new(shared("read=1,cancel=1"), 0, 1);
        let first = p.next_request();
        assert_eq!((first.op, first.substituted), (Op::Create, true));
        let text = String::from_utf8(first.bytes).unwrap();
        assert!(text.starts_with("POST /api/v1/verifications/ HTTP/1.1\r\n"));
        assert!(text.contains("\"webhook_url\":\"http://127.0.0.1:9/hook\""));
        p.created(0, "ver_A".into(), true);
        p.created(1, "ver_B".into(), true);
        for _ in 0..10 {
            let n = p.next_request();
            let text = String::from_utf8(n.bytes).unwrap();
            assert!(!n.substituted, "{text}");
            let id = if n.key == 0 { "ver_A" } else { "ver_B" };
            match n.op {
                Op::Read => assert!(
                    text.starts_with(&format!("GET /api/v1/verifications/{id}/ HTTP/1.1\r\n"))
                ),
                Op::Cancel => assert!(text.starts_with(&format!(
                    "POST /api/v1/verifications/{id}/cancel/ HTTP/1.1\r\n"
                ))),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn get_needs_no_key() {
        let mut p = Planner::new(shared("get=1"), 1, 3);
        let n = p.next_request();
        assert_eq!(n.op, Op::Get);
        assert_eq!(n.bytes, b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n\r\n");
    }

    #[test]
    fn zipf_ranks_stay_in_the_set_and_favour_the_newest() {
        let mut rng = Rng::new(7);
        let n = 100_000;
        let mut counts = vec![0u32; n];
        for _ in 0..200_000 {
            let unit = (rng.next_u64() >> 11) as f64 / ((1u64 << 53) as f64);
            counts[zipf_rank(n, 1.0, unit)] += 1;
        }
        // Under Zipf with s = 1 over 100,000 ranks, rank 0 draws about
        // 1/H(100000) ~ 8 % and the newest hundred about 43 %.
        let first = f64::from(counts[0]) / 200_000.0;
        let hundred: u32 = counts[..100].iter().sum();
        assert!((0.05..0.11).contains(&first), "rank 0 share {first}");
        assert!((0.35..0.50).contains(&(f64::from(hundred) / 200_000.0)));
        assert!(
            counts[n - 1000..].iter().any(|c| *c > 0),
            "the tail is reached"
        );
        // The bounds: every exponent, the ends of the unit interval.
        for s in [0.5, 1.0, 1.5, 4.0] {
            for unit in [0.0, 0.5, 0.999_999_999] {
                assert!(zipf_rank(n, s, unit) < n);
                assert_eq!(zipf_rank(1, s, unit), 0);
            }
        }
    }

    #[test]
    fn a_prefilling_planner_plans_creates_whatever_the_mix() {
        let mut one = Arc::try_unwrap(shared("read=1")).unwrap();
        one.tokens.truncate(1);
        let mut p = Planner::new(Arc::new(one), 0, 1);
        p.set_prefilling(true);
        for _ in 0..10 {
            let r = p.next_request();
            assert_eq!(r.op, Op::Create);
            assert!(!r.substituted, "a prefill create is not a substitute");
        }
        p.set_prefilling(false);
        p.created(0, "ver_1".into(), true);
        assert_eq!(p.next_request().op, Op::Read);
    }

    #[test]
    fn the_working_set_keeps_the_newest_ids_and_zipf_reads_the_newest_most() {
        let mut sh = Arc::try_unwrap(shared("read=1")).unwrap();
        sh.tokens.truncate(1);
        sh.working_set = 4;
        sh.zipf = 3.0;
        let mut p = Planner::new(Arc::new(sh), 0, 1);
        for n in 0..10 {
            p.created(0, format!("ver_{n}"), true);
        }
        let mut seen = std::collections::BTreeMap::<String, u32>::new();
        for _ in 0..2000 {
            let r = p.next_request();
            let text = String::from_utf8(r.bytes).unwrap();
            let id = text.split('/').nth(4).unwrap().to_owned();
            *seen.entry(id).or_default() += 1;
        }
        // Only the four newest remain, and the newest is read most.
        let ids: Vec<&str> = seen.keys().map(String::as_str).collect();
        assert_eq!(ids, ["ver_6", "ver_7", "ver_8", "ver_9"], "{seen:?}");
        assert!(
            seen["ver_9"] > seen["ver_8"] && seen["ver_8"] > seen["ver_6"],
            "{seen:?}"
        );
    }
}
