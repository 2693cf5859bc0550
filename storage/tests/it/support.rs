//! Helpers shared by the storage integration tests: a fresh database with
//! one company and key, row builders, and synchronous wrappers around the
//! store's reply callbacks.
//!
//! Not for: the service's test harness (`tests/it/support`), which drives
//! the whole binary.

use dialproof_engine::caller_evidence::{CallerEvidence, CallerIdSource, CallerIdTrust};
use dialproof_engine::pool::Pool;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::{Event, Status};
use dialproof_engine::CompanyId;
use dialproof_storage::{
    Admin, Options, Reader, StorageError, Store, TransitionResult, VerificationRow, WriteOp,
};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

pub const T0: UnixMillis = UnixMillis(1_800_000_000_000);
/// How long a test waits for a reply before calling it lost.
pub const REPLY_WAIT: Duration = Duration::from_secs(30);

pub struct Db {
    /// Kept for the database's lifetime (dropping it removes the file).
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub company: CompanyId,
    pub key: i64,
    /// A second company (with its own key), for scoping tests.
    pub other_company: CompanyId,
}

pub fn db() -> Db {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("data").join("dialproof.db");
    let admin = Admin::open(&path).expect("admin open");
    let (company, key) = acme(&admin);
    let other_company = admin
        .create_company("Other", "whsec_b", T0)
        .expect("company")
        .id;
    admin
        .create_key(other_company, "main", "othr0001", "hash-b", T0)
        .expect("key");
    Db {
        _dir: dir,
        path,
        company,
        key,
        other_company,
    }
}

/// The company "Acme" and its key "main", created through `admin`: their
/// ids.
pub fn acme(admin: &Admin) -> (CompanyId, i64) {
    let company = admin
        .create_company("Acme", "whsec_a", T0)
        .expect("company")
        .id;
    let key = admin
        .create_key(company, "main", "acme0001", "hash-a", T0)
        .expect("key")
        .id;
    (company, key)
}

impl Db {
    pub fn store(&self) -> Store {
        Store::open(&self.path, Options::default()).expect("store open")
    }

    pub fn store_with(&self, opts: Options) -> Store {
        Store::open(&self.path, opts).expect("store open")
    }

    pub fn reader(&self) -> Reader {
        Reader::open(&self.path).expect("reader open")
    }

    pub fn admin(&self) -> Admin {
        Admin::open(&self.path).expect("admin open")
    }

    pub fn sql(&self) -> rusqlite::Connection {
        let c = rusqlite::Connection::open(&self.path).expect("sqlite open");
        c.busy_timeout(Duration::from_secs(5))
            .expect("busy timeout");
        c
    }

    /// SQLite's plan for `sql`: the detail of `EXPLAIN QUERY PLAN`'s first
    /// row.
    pub fn query_plan(&self, sql: &str, params: impl rusqlite::Params) -> String {
        self.sql()
            .query_row(&format!("EXPLAIN QUERY PLAN {sql}"), params, |r| r.get(3))
            .expect("plan")
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.sql().query_row(sql, [], |r| r.get(0)).expect("count")
    }

    pub fn row(&self, n: usize) -> VerificationRow {
        pending_row(&format!("ver_{n:026}"), self.company, self.key, n)
    }
}

pub fn pending_row(id: &str, company: CompanyId, key: i64, n: usize) -> VerificationRow {
    VerificationRow {
        id: id.to_owned(),
        company_id: company,
        api_key_id: key,
        phone: "+79123456789".into(),
        dial_number: format!("+7495{:07}", n % 10_000_000),
        pool: Pool::Domestic,
        client_ref: format!("order-{n}"),
        info: "tariff A".into(),
        webhook_url: "https://example.com/hook".into(),
        ttl_seconds: 60,
        status: Status::Pending,
        created_at: T0,
        expires_at: T0.plus_seconds(60),
        completed_at: None,
        caller_id: String::new(),
        lease_generation: 7,
        failure_reason: None,
        idempotency_key: None,
        livemode: true,
        caller_evidence: None,
    }
}

/// Submits an insert and waits for its reply.
pub fn insert(store: &Store, row: VerificationRow) -> Result<(), StorageError> {
    let (tx, rx) = mpsc::channel();
    store.submit(WriteOp::InsertVerification {
        keyed: None,
        row,
        reply: Box::new(move |r| {
            let _ = tx.send(r);
        }),
    })?;
    rx.recv_timeout(REPLY_WAIT)
        .expect("insert reply")
        .map(|inserted| assert_eq!(inserted, dialproof_storage::Inserted::Created))
}

/// Submits a 503 rejection row and waits for its COMMIT.
pub fn insert_rejection(
    store: &Store,
    rejection: dialproof_storage::NewRejection,
) -> Result<(), StorageError> {
    let (tx, rx) = mpsc::channel();
    store.submit(WriteOp::InsertRejection {
        rejection,
        reply: Box::new(move |r| {
            let _ = tx.send(r);
        }),
    })?;
    rx.recv_timeout(REPLY_WAIT).expect("rejection reply")
}

/// Submits a transition and waits for its reply.
pub fn transition(
    store: &Store,
    id: &str,
    company_id: Option<CompanyId>,
    event: Event,
) -> Result<TransitionResult, StorageError> {
    let (tx, rx) = mpsc::channel();
    store.submit(WriteOp::Transition {
        id: id.to_owned(),
        owner: company_id.map(Into::into),
        event,
        reply: Some(Box::new(move |r| {
            let _ = tx.send(r);
        })),
    })?;
    rx.recv_timeout(REPLY_WAIT).expect("transition reply")
}

/// Runs a read job on the store's readers and waits for it.
pub fn read<T: Send + 'static>(
    store: &Store,
    job: impl FnOnce(&Reader) -> T + Send + 'static,
) -> Result<T, StorageError> {
    let (tx, rx) = mpsc::channel();
    store.read(
        job,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    rx.recv_timeout(REPLY_WAIT).expect("read reply")
}

pub fn call(at: UnixMillis, caller: &str) -> Event {
    Event::Call {
        at,
        caller: caller.to_owned(),
        evidence: CallerEvidence {
            source: CallerIdSource::From,
            trust: CallerIdTrust::Unverified,
        },
    }
}
