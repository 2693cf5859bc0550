//! Rows as the rest of Dialproof sees them, and their mapping to SQL columns.
//!
//! Every conversion from a stored value to a typed field is checked here: an
//! unknown status text or a negative TTL is `StorageError::Corrupt`, never a
//! panic.
//!
//! Not for: queries (see `reader`, `writer`, `admin`, `companies`) or
//! validation of what callers store (the binary parses at the edge).

use crate::error::{Result, StorageError};
use dialproof_engine::caller_evidence::{CallerEvidence, CallerIdSource, CallerIdTrust};
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::{EventType, Status};
use dialproof_engine::verification_start::Started;
use dialproof_engine::CompanyId;
use rusqlite::Row;

/// One verification, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerificationRow {
    pub id: String,
    pub company_id: CompanyId,
    pub api_key_id: i64,
    pub phone: String,
    pub dial_number: String,
    pub pool: Pool,
    pub client_ref: String,
    pub info: String,
    pub webhook_url: String,
    pub ttl_seconds: u32,
    pub status: Status,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub completed_at: Option<UnixMillis>,
    pub caller_id: String,
    /// How the caller was read; set with `caller_id` by a completing call.
    pub caller_evidence: Option<CallerEvidence>,
    pub lease_generation: u32,
    pub failure_reason: Option<String>,
    /// The `Idempotency-Key` the verification was created with, if any.
    pub idempotency_key: Option<String>,
    /// Live (`true`) or test mode: the mode of the key that created it.
    pub livemode: bool,
}

/// One verification as the API shows it, borrowed: from a row in memory
/// ([`VerificationRow::view`]) or straight from SQLite's buffers
/// ([`crate::Reader::owned_verification_view`]). Why: a GET that decoded
/// the whole row allocated a string for each of its thirteen text columns;
/// allocation was about a tenth of the server's CPU per GET over a large
/// working set, most of it for those strings (`perf` of
/// `tools/read-ab.sh`). The view decodes nothing it does not show and
/// copies no text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerificationView<'a> {
    pub id: &'a str,
    pub phone: &'a str,
    pub dial_number: &'a str,
    pub client_ref: &'a str,
    pub info: &'a str,
    pub status: Status,
    pub ttl_seconds: u32,
    pub created_at: UnixMillis,
    pub expires_at: UnixMillis,
    pub completed_at: Option<UnixMillis>,
    pub caller_id: &'a str,
    pub caller_evidence: Option<CallerEvidence>,
    pub livemode: bool,
}

impl VerificationRow {
    /// What the API shows of the row.
    pub fn view(&self) -> VerificationView<'_> {
        VerificationView {
            id: &self.id,
            phone: &self.phone,
            dial_number: &self.dial_number,
            client_ref: &self.client_ref,
            info: &self.info,
            status: self.status,
            ttl_seconds: self.ttl_seconds,
            created_at: self.created_at,
            expires_at: self.expires_at,
            completed_at: self.completed_at,
            caller_id: &self.caller_id,
            caller_evidence: self.caller_evidence,
            livemode: self.livemode,
        }
    }

    /// The company and mode whose keys may see the row.
    pub fn owner(&self) -> Owner {
        Owner {
            company_id: self.company_id,
            livemode: self.livemode,
        }
    }

    /// The row of a verification the engine started, for its owner.
    pub fn new(id: String, company_id: CompanyId, api_key_id: i64, started: Started) -> Self {
        let request = started.request;
        VerificationRow {
            id,
            company_id,
            api_key_id,
            phone: request.phone,
            dial_number: started.dial_number,
            pool: request.pool,
            client_ref: request.client_ref,
            info: request.info,
            webhook_url: request.webhook_url,
            ttl_seconds: request.ttl_seconds,
            status: started.status,
            created_at: started.created_at,
            expires_at: started.expires_at,
            completed_at: None,
            caller_id: String::new(),
            caller_evidence: None,
            lease_generation: started.lease_generation,
            failure_reason: None,
            idempotency_key: None,
            livemode: true,
        }
    }
}

/// Whose a verification is, for the API: a company's key sees only its
/// company's rows of its own mode (a test key never a live row, nor the
/// reverse).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    pub company_id: CompanyId,
    pub livemode: bool,
}

/// A bare company is its live owner.
impl From<CompanyId> for Owner {
    fn from(company_id: CompanyId) -> Owner {
        Owner {
            company_id,
            livemode: true,
        }
    }
}

impl Owner {
    /// Whether `row` is this owner's.
    pub fn owns(&self, row: &VerificationRow) -> bool {
        row.company_id == self.company_id && row.livemode == self.livemode
    }
}

/// A create request refused with 503 ('all lines busy'), kept for the dashboard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRejection {
    pub company_id: CompanyId,
    pub api_key_id: i64,
    pub phone: String,
    pub pool: Pool,
    pub reason: String,
    pub at: UnixMillis,
    pub livemode: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRow {
    pub id: i64,
    pub company_id: CompanyId,
    pub label: String,
    pub prefix: String,
    pub secret_hash: String,
    pub created_at: UnixMillis,
    pub last_used_at: Option<UnixMillis>,
    pub revoked_at: Option<UnixMillis>,
    pub rate_limit_per_minute: Option<u32>,
    /// Live (`true`) or test key (`svc_test_`).
    pub livemode: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompanyRow {
    pub id: CompanyId,
    pub name: String,
    pub created_at: UnixMillis,
    pub webhook_secret: String,
    pub previous_webhook_secret: Option<String>,
    pub previous_secret_valid_until: Option<UnixMillis>,
    pub send_failed_webhooks: bool,
    /// Webhook URLs this company may use over plain `http` (development
    /// receivers). Stored newline-separated.
    pub dev_webhook_urls: Vec<String>,
    /// Numbers in each of the company's test pools; `None`: the service's
    /// default.
    pub test_pool_size: Option<u32>,
}

/// A lease a transition ended: `dial_number` goes back to the lease table
/// if the table still holds it at `generation` (an older generation means
/// the number was already released and issued again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleasedLease {
    pub dial_number: String,
    pub generation: u32,
}

/// What a `WriteOp::Transition` did, reported after COMMIT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransitionResult {
    /// The row after the transition; `None` when the id is unknown or belongs
    /// to another company than the one asked for.
    pub row: Option<VerificationRow>,
    /// Whether the status changed (false for a repeated cancel, a late call...).
    pub changed: bool,
    /// The lease to give back to the lease table.
    pub released: Option<ReleasedLease>,
    /// The outbox row written with the transition, if any.
    pub delivery_id: Option<i64>,
}

/// The state of an outbox row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    Pending,
    Delivered,
    Dead,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Dead => "dead",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryState> {
        match s {
            "pending" => Some(DeliveryState::Pending),
            "delivered" => Some(DeliveryState::Delivered),
            "dead" => Some(DeliveryState::Dead),
            _ => None,
        }
    }
}

/// One webhook outbox row: the exact bytes to POST and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryRow {
    pub id: i64,
    pub verification_id: String,
    pub company_id: CompanyId,
    pub event_type: EventType,
    pub url: String,
    pub payload: String,
    pub state: DeliveryState,
    pub attempts: u32,
    pub next_attempt_at: Option<UnixMillis>,
    pub created_at: UnixMillis,
    pub updated_at: UnixMillis,
    /// The verification's mode: test-mode deliveries are counted apart
    /// (the operators' backlog and dead-delivery alerts are for live ones).
    pub livemode: bool,
}

/// The columns of a [`VerificationView`], in the order
/// [`verification_view_from_row`] reads them (a macro so that the SQL
/// texts below are literals: `prepare_cached` finds statements by their
/// text, and a text built per GET would be an allocation per GET).
macro_rules! view_columns {
    () => {
        "id, phone, dial_number, client_ref, info, status, ttl_seconds, created_at, \
         expires_at, completed_at, caller_id, caller_id_source, caller_id_trust, livemode"
    };
}

/// Column list matching [`verification_from_row`], in order: the view's,
/// then the rest of the row. A macro for the same reason as
/// `view_columns!`: the writer finds a call's row with it on every call.
macro_rules! verification_columns {
    () => {
        concat!(
            $crate::rows::view_columns!(),
            ", company_id, api_key_id, pool, webhook_url, lease_generation, failure_reason, \
             idempotency_key"
        )
    };
}
pub(crate) use {verification_columns, view_columns};

/// [`verification_columns!`] as a constant, for texts built at run time.
pub(crate) const VERIFICATION_COLUMNS: &str = verification_columns!();

/// A verification's [`VerificationView`] by id, company and mode.
pub(crate) const VERIFICATION_VIEW_BY_OWNER: &str = concat!(
    "SELECT ",
    view_columns!(),
    " FROM verifications WHERE id = ?1 AND company_id = ?2 AND livemode = ?3"
);

/// The view of a row selected with the view's columns first (as
/// [`VERIFICATION_VIEW_BY_OWNER`] and [`VERIFICATION_COLUMNS`] select it),
/// borrowing its text from `r`.
pub(crate) fn verification_view_from_row<'a>(r: &'a Row<'_>) -> Result<VerificationView<'a>> {
    let status_text = text(r, 5)?;
    Ok(VerificationView {
        id: text(r, 0)?,
        phone: text(r, 1)?,
        dial_number: text(r, 2)?,
        client_ref: text(r, 3)?,
        info: text(r, 4)?,
        status: Status::parse(status_text)
            .ok_or_else(|| StorageError::Corrupt(format!("unknown status '{status_text}'")))?,
        ttl_seconds: to_u32(r.get(6)?, "verifications.ttl_seconds")?,
        created_at: UnixMillis(r.get(7)?),
        expires_at: UnixMillis(r.get(8)?),
        completed_at: r.get::<_, Option<i64>>(9)?.map(UnixMillis),
        caller_id: text(r, 10)?,
        caller_evidence: evidence_from_columns(optional_text(r, 11)?, optional_text(r, 12)?)?,
        livemode: r.get::<_, i64>(13)? != 0,
    })
}

/// Column `i` of `r` as text, borrowed from SQLite's buffer.
fn text<'a>(r: &'a Row<'_>, i: usize) -> Result<&'a str> {
    optional_text(r, i)?.ok_or_else(|| StorageError::Corrupt(format!("column {i} is null")))
}

/// Column `i` of `r` as text or null, borrowed from SQLite's buffer.
pub(crate) fn optional_text<'a>(r: &'a Row<'_>, i: usize) -> Result<Option<&'a str>> {
    let value = r.get_ref(i)?;
    value
        .as_str_or_null()
        .map_err(|e| StorageError::Corrupt(format!("column {i}: {e}")))
}

/// The whole row selected with [`VERIFICATION_COLUMNS`]: its view (one
/// decoding of the shown columns), then the columns only the row has.
pub(crate) fn verification_from_row(r: &Row<'_>) -> Result<VerificationRow> {
    let v = verification_view_from_row(r)?;
    let pool_text = text(r, 16)?;
    Ok(VerificationRow {
        id: v.id.to_owned(),
        company_id: r.get(14)?,
        api_key_id: r.get(15)?,
        phone: v.phone.to_owned(),
        dial_number: v.dial_number.to_owned(),
        pool: Pool::parse(pool_text)
            .ok_or_else(|| StorageError::Corrupt(format!("unknown pool '{pool_text}'")))?,
        client_ref: v.client_ref.to_owned(),
        info: v.info.to_owned(),
        webhook_url: r.get(17)?,
        ttl_seconds: v.ttl_seconds,
        status: v.status,
        created_at: v.created_at,
        expires_at: v.expires_at,
        completed_at: v.completed_at,
        caller_id: v.caller_id.to_owned(),
        lease_generation: to_u32(r.get(18)?, "verifications.lease_generation")?,
        failure_reason: r.get(19)?,
        idempotency_key: r.get(20)?,
        caller_evidence: v.caller_evidence,
        livemode: v.livemode,
    })
}

/// The stored evidence: both columns or neither (a row completed before
/// migration 5 has neither); anything else is corrupt.
pub(crate) fn evidence_from_columns(
    source: Option<&str>,
    trust: Option<&str>,
) -> Result<Option<CallerEvidence>> {
    match (source, trust) {
        (None, None) => Ok(None),
        (Some(s), Some(t)) => {
            let source = CallerIdSource::parse(s)
                .ok_or_else(|| StorageError::Corrupt(format!("unknown caller_id_source '{s}'")))?;
            let trust = CallerIdTrust::parse(t)
                .ok_or_else(|| StorageError::Corrupt(format!("unknown caller_id_trust '{t}'")))?;
            Ok(Some(CallerEvidence { source, trust }))
        }
        (s, t) => Err(StorageError::Corrupt(format!(
            "caller_id_source {s:?} without caller_id_trust {t:?}"
        ))),
    }
}

pub(crate) const KEY_COLUMNS: &str = "id, company_id, label, prefix, secret_hash, created_at, \
     last_used_at, revoked_at, rate_limit_per_minute, livemode";

pub(crate) fn key_from_row(r: &Row<'_>) -> Result<KeyRow> {
    Ok(KeyRow {
        id: r.get(0)?,
        company_id: r.get(1)?,
        label: r.get(2)?,
        prefix: r.get(3)?,
        secret_hash: r.get(4)?,
        created_at: UnixMillis(r.get(5)?),
        last_used_at: r.get::<_, Option<i64>>(6)?.map(UnixMillis),
        revoked_at: r.get::<_, Option<i64>>(7)?.map(UnixMillis),
        rate_limit_per_minute: r
            .get::<_, Option<i64>>(8)?
            .map(|v| to_u32(v, "api_keys.rate_limit_per_minute"))
            .transpose()?,
        livemode: r.get::<_, i64>(9)? != 0,
    })
}

pub(crate) const COMPANY_COLUMNS: &str = "id, name, created_at, webhook_secret, \
     previous_webhook_secret, previous_secret_valid_until, send_failed_webhooks, dev_webhook_urls, test_pool_size";

pub(crate) fn company_from_row(r: &Row<'_>) -> Result<CompanyRow> {
    let dev_urls: String = r.get(7)?;
    Ok(CompanyRow {
        id: r.get(0)?,
        name: r.get(1)?,
        created_at: UnixMillis(r.get(2)?),
        webhook_secret: r.get(3)?,
        previous_webhook_secret: r.get(4)?,
        previous_secret_valid_until: r.get::<_, Option<i64>>(5)?.map(UnixMillis),
        send_failed_webhooks: r.get::<_, i64>(6)? != 0,
        dev_webhook_urls: split_urls(&dev_urls),
        test_pool_size: r
            .get::<_, Option<i64>>(8)?
            .map(|v| to_u32(v, "companies.test_pool_size"))
            .transpose()?,
    })
}

/// Column list matching [`delivery_from_row`], in order. The mode is the
/// row's own column (migration 7), so reading a delivery touches no other
/// table.
/// A macro so that the texts of the per-attempt statements are literals
/// (see `view_columns!`).
macro_rules! delivery_columns {
    () => {
        "id, verification_id, company_id, event_type, url, \
         payload, state, attempts, next_attempt_at, created_at, updated_at, livemode"
    };
}
pub(crate) use delivery_columns;

/// [`delivery_columns!`] as a constant, for texts built at run time.
pub(crate) const DELIVERY_COLUMNS: &str = delivery_columns!();

pub(crate) fn delivery_from_row(r: &Row<'_>) -> Result<DeliveryRow> {
    let event_text: String = r.get(3)?;
    let state_text: String = r.get(6)?;
    Ok(DeliveryRow {
        id: r.get(0)?,
        verification_id: r.get(1)?,
        company_id: r.get(2)?,
        event_type: EventType::parse(&event_text)
            .ok_or_else(|| StorageError::Corrupt(format!("unknown event type '{event_text}'")))?,
        url: r.get(4)?,
        payload: r.get(5)?,
        state: DeliveryState::parse(&state_text).ok_or_else(|| {
            StorageError::Corrupt(format!("unknown delivery state '{state_text}'"))
        })?,
        attempts: to_u32(r.get(7)?, "webhook_deliveries.attempts")?,
        next_attempt_at: r.get::<_, Option<i64>>(8)?.map(UnixMillis),
        created_at: UnixMillis(r.get(9)?),
        updated_at: UnixMillis(r.get(10)?),
        livemode: r.get::<_, i64>(11)? != 0,
    })
}

/// The column form of a URL list: one URL a line, no empty lines.
pub(crate) fn join_urls(urls: &[String]) -> String {
    urls.join("\n")
}

pub(crate) fn split_urls(column: &str) -> Vec<String> {
    column
        .split('\n')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect()
}

fn to_u32(v: i64, column: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| StorageError::Corrupt(format!("{column} = {v} is out of range")))
}

/// Runs a prepared query and maps every row with `map`, which may fail with
/// `Corrupt` (rusqlite's own mapping closure cannot carry our error type).
pub(crate) fn collect_rows<T>(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    map: fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(map(r)?);
    }
    Ok(out)
}

/// Like [`collect_rows`] for at most one row.
pub(crate) fn first_row<T>(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    map: fn(&Row<'_>) -> Result<T>,
) -> Result<Option<T>> {
    let mut rows = stmt.query(params)?;
    match rows.next()? {
        Some(r) => Ok(Some(map(r)?)),
        None => Ok(None),
    }
}
