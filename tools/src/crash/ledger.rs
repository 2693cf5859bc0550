//! What the crash harness was told, and the invariants it checks against
//! what it reads back: every `201` is readable with the same fields, a
//! verification never changes after a terminal state, no dial number is
//! held by two pending verifications, no verification gets two kinds of
//! webhook (or one that contradicts its status), every webhook verifies,
//! and every terminal verification's webhook arrives.
//!
//! Not for: talking to the service (`super::run` does, and feeds this).

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

/// Fields fixed at creation: a read must show exactly what the 201 showed.
const FIXED_FIELDS: [&str; 8] = [
    "verification_id",
    "phone",
    "dial_number",
    "client_ref",
    "info",
    "ttl_seconds",
    "created_at",
    "expires_at",
];

struct Record {
    created: Value,
    /// The first terminal state read (or answered by a cancel).
    terminal: Option<Value>,
    /// When that was recorded: a read sent before it may show the state
    /// before (it raced the change), which is no violation.
    terminal_at: Option<Instant>,
}

#[derive(Default)]
struct Inner {
    records: HashMap<String, Record>,
    ids: Vec<String>,
    /// Verifications a cancel was sent for, whatever its answer. A cancel
    /// makes a verification `expired` with no webhook (the spec), which a
    /// read cannot tell from a TTL expiry, so these are left out of the
    /// delivery check.
    cancelled: std::collections::HashSet<String>,
    /// Webhook event types received per verification, one per delivery.
    webhooks: HashMap<String, Vec<String>>,
    /// Each idempotency key answered 201: its request body and the
    /// verification every 201 for it must name.
    keys: HashMap<String, (Value, String)>,
    violations: Vec<String>,
    counts: BTreeMap<&'static str, u64>,
}

/// Shared by the load threads, the webhook receiver and the checks.
#[derive(Default)]
pub struct Ledger {
    inner: Mutex<Inner>,
}

fn status(v: &Value) -> &str {
    v["status"].as_str().unwrap_or("")
}

impl Ledger {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panicking load thread must not hide what the others recorded.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn count(&self, what: &'static str) {
        *self.lock().counts.entry(what).or_default() += 1;
    }

    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.lock().counts.clone()
    }

    /// Records a violation once (a later check finding it again adds
    /// nothing).
    pub fn violation(&self, text: String) {
        let mut inner = self.lock();
        if !inner.violations.contains(&text) {
            inner.violations.push(text);
        }
    }

    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// A `201` and its Verification.
    pub fn created(&self, v: Value) {
        let Some(id) = v["verification_id"].as_str().map(str::to_owned) else {
            self.violation(format!("a 201 without verification_id: {v}"));
            return;
        };
        let mut inner = self.lock();
        *inner.counts.entry("created (201)").or_default() += 1;
        inner.ids.push(id.clone());
        inner.records.insert(
            id,
            Record {
                created: v,
                terminal: None,
                terminal_at: None,
            },
        );
    }

    /// A `201` to a create with idempotency `key` and `body` (`replayed`
    /// when it said so): one key, at most one verification, whichever
    /// attempt got the answer.
    pub fn created_keyed(&self, key: &str, body: &Value, v: Value, replayed: bool) {
        let id = v["verification_id"].as_str().unwrap_or("").to_owned();
        let known = self.lock().keys.get(key).map(|(_, id)| id.clone());
        match known {
            Some(first) if first != id => self.violation(format!(
                "idempotency key {key}: two verifications, {first} and {id}"
            )),
            Some(_) if !replayed => self.violation(format!(
                "idempotency key {key}: {id} answered again without Idempotent-Replayed"
            )),
            Some(_) => self.count("replayed (201)"),
            None => {
                self.lock()
                    .keys
                    .insert(key.to_owned(), (body.clone(), id.clone()));
                if replayed {
                    // Its first 201 was lost (a kill): this is its first.
                    self.count("replayed after a lost answer (201)");
                }
                self.created(v);
            }
        }
    }

    /// Whether a 201 was seen for `key`.
    pub fn knows_key(&self, key: &str) -> bool {
        self.lock().keys.contains_key(key)
    }

    /// Every acknowledged key: (key, its request body, its verification).
    pub fn acknowledged_keys(&self) -> Vec<(String, Value, String)> {
        let inner = self.lock();
        let mut keys: Vec<_> = inner
            .keys
            .iter()
            .map(|(k, (body, id))| (k.clone(), body.clone(), id.clone()))
            .collect();
        keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        keys
    }

    /// A Verification the service showed (a read, or a cancel's answer)
    /// to a request sent at `sent`.
    pub fn observe(&self, v: &Value, sent: Instant) {
        let id = v["verification_id"].as_str().unwrap_or("").to_owned();
        let mut inner = self.lock();
        let Some(rec) = inner.records.get_mut(&id) else {
            return;
        };
        let mut found = Vec::new();
        for f in FIXED_FIELDS {
            if rec.created[f] != v[f] {
                found.push(format!(
                    "{id}: {f} was {} at 201, now {}",
                    rec.created[f], v[f]
                ));
            }
        }
        let raced = rec.terminal_at.is_some_and(|at| sent < at);
        match &rec.terminal {
            Some(t) if t != v && !raced => {
                found.push(format!("{id} changed after {}: {t} -> {v}", status(t)))
            }
            Some(_) => {}
            None if status(v) != "pending" => {
                rec.terminal = Some(v.clone());
                rec.terminal_at = Some(Instant::now());
            }
            None => {}
        }
        drop(inner);
        for f in found {
            self.violation(f);
        }
    }

    /// A cancel is about to be sent for `id`.
    pub fn cancelling(&self, id: &str) {
        self.lock().cancelled.insert(id.to_owned());
    }

    /// A webhook the receiver verified (or not).
    pub fn webhook(&self, id: &str, event_type: &str, valid: bool) {
        let mut inner = self.lock();
        *inner.counts.entry("webhooks received").or_default() += 1;
        if !valid {
            let text = format!("{id}: {event_type} webhook with a bad signature");
            if !inner.violations.contains(&text) {
                inner.violations.push(text);
            }
        }
        inner
            .webhooks
            .entry(id.to_owned())
            .or_default()
            .push(event_type.to_owned());
    }

    /// Every verification answered 201 so far.
    pub fn ids(&self) -> Vec<String> {
        self.lock().ids.clone()
    }

    /// Those not yet seen in a terminal state.
    pub fn open_ids(&self) -> Vec<String> {
        let inner = self.lock();
        inner
            .ids
            .iter()
            .filter(|id| inner.records[*id].terminal.is_none())
            .cloned()
            .collect()
    }

    /// Verifications read pending in one pass that share a dial number.
    pub fn check_pending_numbers(&self, read: &[Value]) {
        let mut by_number: HashMap<&str, Vec<&str>> = HashMap::new();
        for v in read.iter().filter(|v| status(v) == "pending") {
            by_number
                .entry(v["dial_number"].as_str().unwrap_or(""))
                .or_default()
                .push(v["verification_id"].as_str().unwrap_or(""));
        }
        for (number, ids) in by_number.into_iter().filter(|(_, ids)| ids.len() > 1) {
            self.violation(format!(
                "{number} leased to {} pending verifications: {ids:?}",
                ids.len()
            ));
        }
    }

    /// No verification got two kinds of webhook, or one its status denies.
    pub fn check_webhook_kinds(&self) {
        let inner = self.lock();
        let mut found = Vec::new();
        for (id, types) in &inner.webhooks {
            let first = &types[0];
            if types.iter().any(|t| t != first) {
                found.push(format!("{id}: webhooks of two kinds: {types:?}"));
            }
            // A create committed whose 201 was lost to a kill has its
            // webhook too: nothing to compare it with.
            let Some(rec) = inner.records.get(id) else {
                continue;
            };
            if let Some(t) = &rec.terminal {
                if *first != format!("verification.{}", status(t)) {
                    found.push(format!("{id}: {first} webhook, status {}", status(t)));
                }
            }
        }
        drop(inner);
        for f in found {
            self.violation(f);
        }
    }

    /// Terminal verifications whose webhook has not arrived, except those a
    /// cancel was sent for (a cancelled one has none).
    pub fn undelivered(&self) -> Vec<String> {
        let inner = self.lock();
        inner
            .ids
            .iter()
            .filter(|id| {
                let rec = &inner.records[*id];
                rec.terminal
                    .as_ref()
                    .is_some_and(|t| matches!(status(t), "completed" | "expired"))
                    && !inner.webhooks.contains_key(*id)
                    && !inner.cancelled.contains(*id)
            })
            .cloned()
            .collect()
    }

    /// Terminal states read, by status.
    pub fn terminal_counts(&self) -> BTreeMap<String, u64> {
        let inner = self.lock();
        let mut out = BTreeMap::new();
        for rec in inner.records.values() {
            let s = rec.terminal.as_ref().map_or("pending", status);
            *out.entry(s.to_owned()).or_default() += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(id: &str, number: &str, st: &str) -> Value {
        json!({"verification_id": id, "phone": "+79123456789", "dial_number": number,
               "client_ref": null, "info": null, "ttl_seconds": 30,
               "created_at": "t0", "expires_at": "t1", "status": st,
               "completed_at": null, "caller_id_received": null})
    }

    #[test]
    fn each_invariant_is_caught() {
        let l = Ledger::default();
        l.created(v("a", "+1", "pending"));
        l.created(v("b", "+2", "pending"));
        assert!(l.violations().is_empty());
        // A changed fixed field.
        l.observe(&v("a", "+9", "pending"), Instant::now());
        assert_eq!(l.violations().len(), 1);
        // A change after a terminal state.
        l.observe(&v("b", "+2", "expired"), Instant::now());
        l.observe(&v("b", "+2", "completed"), Instant::now());
        assert_eq!(l.violations().len(), 2);
        // Two pending on one number.
        l.check_pending_numbers(&[v("a", "+1", "pending"), v("b", "+1", "pending")]);
        assert_eq!(l.violations().len(), 3);
        // Two kinds of webhook, and one its status denies (b is expired).
        l.webhook("b", "verification.completed", true);
        l.webhook("b", "verification.expired", true);
        l.check_webhook_kinds();
        assert_eq!(l.violations().len(), 5, "{:?}", l.violations());
        l.webhook("a", "verification.completed", false);
        assert_eq!(l.violations().len(), 6);
    }

    #[test]
    fn a_read_sent_before_the_terminal_state_was_seen_is_no_violation() {
        let l = Ledger::default();
        l.created(v("a", "+1", "pending"));
        let early = Instant::now();
        l.observe(&v("a", "+1", "expired"), Instant::now());
        // Sent before the cancel's answer came: it may show pending.
        l.observe(&v("a", "+1", "pending"), early);
        assert!(l.violations().is_empty(), "{:?}", l.violations());
        // Sent after: it may not.
        l.observe(&v("a", "+1", "pending"), Instant::now());
        assert_eq!(l.violations().len(), 1);
    }

    #[test]
    fn one_key_names_one_verification() {
        let l = Ledger::default();
        let body = json!({"phone": "+79123456789"});
        l.created_keyed("k", &body, v("a", "+1", "pending"), false);
        l.created_keyed("k", &body, v("a", "+1", "pending"), true);
        assert!(l.violations().is_empty(), "{:?}", l.violations());
        // A second verification for the key, and an unmarked repeat.
        l.created_keyed("k", &body, v("b", "+2", "pending"), true);
        l.created_keyed("k", &body, v("a", "+1", "pending"), false);
        assert_eq!(l.violations().len(), 2, "{:?}", l.violations());
        // A replay whose first answer was lost counts as the create.
        l.created_keyed("k2", &body, v("c", "+3", "pending"), true);
        assert_eq!(l.ids(), vec!["a".to_owned(), "c".to_owned()]);
        assert_eq!(l.acknowledged_keys().len(), 2);
    }

    #[test]
    fn undelivered_lists_terminal_verifications_without_a_webhook() {
        let l = Ledger::default();
        l.created(v("a", "+1", "pending"));
        l.created(v("b", "+2", "pending"));
        l.created(v("c", "+3", "pending"));
        l.observe(&v("a", "+1", "expired"), Instant::now());
        l.cancelling("b");
        l.observe(&v("b", "+2", "expired"), Instant::now());
        assert_eq!(l.undelivered(), vec!["a".to_owned()]);
        l.webhook("a", "verification.expired", true);
        assert!(l.undelivered().is_empty());
        assert_eq!(l.open_ids(), vec!["c".to_owned()]);
    }
}
