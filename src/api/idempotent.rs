//! The `Idempotency-Key` of a create, between the HTTP request and the
//! engine's rules (`dialproof_engine::idempotency`): the header parsed at
//! the edge, the claim a create holds while it runs, and the answers a key
//! produces (a replayed 201, the two 409s, the 400 for a bad header), all
//! in the spec's envelope for new behaviour:
//! `{"error": {"code", "message", "fields"?}}`.
//!
//! Not for: the create itself (`super::create`), the rules (the engine's
//! table), or storing keys (storage, in the verification's transaction).

use super::envelope::envelope;
use super::verifications::STORAGE_WAIT;
use super::Api;
use crate::http::{Request, Response};
use crate::shared::idempotency::Claim;
use crate::shared::metrics::Metrics;
use crate::shared::wait::{wait_until_applied, Committing, Outcome};
use dialproof_engine::idempotency::{self, Answer, Begin, Fingerprint, IdempotencyKey, Space};
use dialproof_engine::time::UnixMillis;
use dialproof_engine::validate::CreateRequest;
use dialproof_storage::{KeyRow, KeyedCreate, StoredKey};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The header on a replayed 201.
pub const REPLAYED_HEADER: &str = "Idempotent-Replayed";
/// `Retry-After` of the 409 for a key whose create is still running.
pub const IN_FLIGHT_RETRY_AFTER_SECONDS: u64 = 1;
/// How long a retry that finds its key's create just committed waits for
/// the commit consumer to record the answer (microseconds, normally)
/// before it answers the in-flight 409 instead.
const RECORDED_WAIT: Duration = Duration::from_millis(50);

/// A create that claimed its key: the claim, and what the key's row
/// stores besides it.
pub struct Keyed {
    claim: Claim,
    /// Stored keys created at or before this moment are past the retention.
    expired_before: UnixMillis,
}

impl Keyed {
    pub fn key(&self) -> &IdempotencyKey {
        self.claim.key()
    }

    /// What the insert stores with the row: the fingerprint and `body`.
    pub fn stored_with(&self, body: &str) -> KeyedCreate {
        KeyedCreate {
            fingerprint: self.claim.fingerprint(),
            response_body: body.to_owned(),
            expired_before: self.expired_before,
        }
    }

    pub fn into_claim(self) -> Claim {
        self.claim
    }
}

/// The request's key, if it sent one; the 400 if the header is repeated or
/// not a key.
pub fn header(req: &Request) -> Result<Option<IdempotencyKey>, Response> {
    let values: Vec<&str> = req.header_values("idempotency-key").collect();
    idempotency::parse_header(&values).map_err(|e| {
        let fields = json!({ idempotency::HEADER: [e.message()] });
        envelope(
            400,
            "invalid_request",
            "The Idempotency-Key header is not valid.",
            Some(fields),
        )
    })
}

/// Claims `key` for this create, or the answer the key already has: the
/// stored 201, or a 409.
pub fn begin(
    ctx: &Api,
    caller: &KeyRow,
    key: IdempotencyKey,
    input: &CreateRequest,
    now: UnixMillis,
) -> Result<Keyed, Response> {
    let fingerprint = Fingerprint::of(input);
    let company = Space {
        company: caller.company_id,
        livemode: caller.livemode,
    };
    let mut begun = ctx.idempotency.begin(company, &key, fingerprint, now);
    if matches!(begun, Err(Begin::InFlight)) {
        // Its create may have committed a moment ago, with the consumer
        // about to record the answer: a retry then gets the replay.
        wait_until_applied(&ctx.commits, RECORDED_WAIT);
        begun = ctx.idempotency.begin(company, &key, fingerprint, now);
    }
    match begun {
        Ok(claim) => Ok(Keyed {
            claim,
            expired_before: ctx.idempotency.expired_before(now),
        }),
        Err(Begin::Replay(answer)) => Err(replay(ctx, &answer)),
        Err(Begin::Mismatch) => Err(mismatch(ctx, &key)),
        Err(Begin::InFlight | Begin::Claimed) => Err(in_flight(ctx, &key)),
    }
}

/// On the way to a 503 (no number): a key this process does not hold in
/// memory may still be stored (before a restart, or evicted), and then its
/// answer, not the 503, is what the retry gets. `None`: not stored, and
/// the claim is let go.
pub fn stored(ctx: &Api, keyed: Keyed) -> Option<Response> {
    let company = keyed.claim.company();
    let key = keyed.key().as_str().to_owned();
    let expired_before = keyed.expired_before;
    let found = ctx.store.read_within(STORAGE_WAIT, move |r| {
        r.idempotency_key((company.company, company.livemode), &key, expired_before)
    });
    match found {
        Outcome::Done(Some(taken)) => Some(answer_stored(ctx, Some(keyed.claim), taken)),
        Outcome::Done(None) => None,
        other => {
            // Unknown: the 503 stands (it takes no number and stores no
            // key, so a retry asks again).
            tracing::warn!(error = %other, "stored idempotency key not read");
            None
        }
    }
}

/// The answer for a key found stored: the replay if the request is the
/// same, else the conflict. Memory learns it either way.
pub fn answer_stored(ctx: &Api, claim: Option<Claim>, taken: StoredKey) -> Response {
    let answer = Answer {
        fingerprint: taken.fingerprint,
        verification_id: Arc::from(taken.verification_id.as_str()),
        body: Arc::from(taken.response_body.as_str()),
        created_at: taken.created_at,
    };
    let same = claim
        .as_ref()
        .map(|c| c.fingerprint() == answer.fingerprint);
    let key = IdempotencyKey::from_stored(&taken.key);
    match claim {
        Some(claim) => claim.found(answer.clone()),
        None => {
            if let Some(k) = &key {
                let space = Space {
                    company: taken.company_id,
                    livemode: taken.livemode,
                };
                ctx.idempotency.record(space, k, answer.clone());
            }
        }
    }
    match (same, key) {
        (Some(true), _) => replay(ctx, &answer),
        (_, Some(k)) => mismatch(ctx, &k),
        // A stored key that no longer parses is not this request's.
        (_, None) => envelope(
            409,
            "idempotency_conflict",
            "This Idempotency-Key was used with a different request.",
            None,
        ),
    }
}

/// The 201 of a create, with its `Location`.
pub fn created(body: String, id: &str) -> Response {
    Response::json(201, body).with_header("Location", format!("/api/v1/verifications/{id}/"))
}

fn replay(ctx: &Api, answer: &Answer) -> Response {
    Metrics::inc(&ctx.metrics.creates_replayed);
    created(answer.body.to_string(), &answer.verification_id).with_header(REPLAYED_HEADER, "true")
}

fn mismatch(ctx: &Api, key: &IdempotencyKey) -> Response {
    Metrics::inc(&ctx.metrics.idempotency_mismatches);
    tracing::info!(idempotency_key = %key, "idempotency key reused with a different request");
    envelope(
        409,
        "idempotency_conflict",
        "This Idempotency-Key was used with a different request. Use a new key for a new \
         request.",
        None,
    )
}

fn in_flight(ctx: &Api, key: &IdempotencyKey) -> Response {
    Metrics::inc(&ctx.metrics.idempotency_in_flight);
    tracing::debug!(idempotency_key = %key, "create with this idempotency key still running");
    envelope(
        409,
        "conflict",
        "A request with this Idempotency-Key is still being processed. Retry after a second.",
        None,
    )
    .with_header("Retry-After", IN_FLIGHT_RETRY_AFTER_SECONDS.to_string())
}
