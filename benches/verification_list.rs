//! The dashboard's verification list at a million stored rows: fills a
//! fresh database with 1,000,000 verifications (and 20,000 503 rejections)
//! of one company over 30 days, plus another company's rows, then times
//! what one verifications page reads (a page of 50 rows and the period's
//! totals with their chart buckets) under several filters, on a reader
//! connection as the service uses. Prints the median and the worst of 20
//! runs per case; the target is under 50 ms per page.
//!
//! Run: `cargo bench --bench verification_list` (about 30 s, most of it the
//! fill).

use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::Status;
use dialproof_storage::{Admin, ListCursor, ListFilter, Reader};
use std::time::{Duration, Instant};

const ROWS: i64 = 1_000_000;
const REJECTIONS: i64 = 20_000;
const DAYS: i64 = 30;
const DAY_MS: i64 = 86_400_000;
const NOW: i64 = 1_800_000_000_000;
const RUNS: usize = 20;

fn fill(path: &std::path::Path) -> (i64, i64) {
    let admin = Admin::open(path).expect("migrate");
    let acme = admin
        .create_company("Acme", "whsec_x", UnixMillis(0))
        .expect("company")
        .id;
    let other = admin
        .create_company("Other", "whsec_y", UnixMillis(0))
        .expect("company")
        .id;
    let key = admin
        .create_key(acme, "k", "AAAAAAAA", "h", UnixMillis(0))
        .expect("key")
        .id;
    let other_key = admin
        .create_key(other, "k", "BBBBBBBB", "h", UnixMillis(0))
        .expect("key")
        .id;
    drop(admin);
    let mut db = rusqlite::Connection::open(path).expect("open");
    let tx = db.transaction().expect("tx");
    insert_verifications(&tx, (acme, key), (other, other_key));
    insert_rejections(&tx, acme, key);
    tx.commit().expect("commit");
    db.execute_batch("ANALYZE").expect("analyze");
    (acme, 0)
}

/// A million rows of `acme` over the last DAYS (statuses in turn) and a
/// tenth as many of `other`, each `(company, key)`.
fn insert_verifications(tx: &rusqlite::Transaction, acme: (i64, i64), other: (i64, i64)) {
    let mut v = tx
        .prepare(
            "INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number, pool, \
             client_ref, webhook_url, ttl_seconds, status, created_at, expires_at, \
             completed_at, caller_id, lease_generation) VALUES (?1, ?2, ?3, ?4, \
             '+74950000000', 'domestic', ?5, 'https://receiver.example/h', 60, ?6, ?7, ?8, \
             NULL, '', 0)",
        )
        .expect("prepare");
    let span = DAYS * DAY_MS;
    for i in 0..ROWS + ROWS / 10 {
        let (company, k) = if i < ROWS { acme } else { other };
        let at = NOW - span + (i % ROWS) * (span / ROWS);
        let status = ["completed", "expired", "completed", "failed"][(i % 4) as usize];
        v.execute(rusqlite::params![
            format!("ver_{i:026}"),
            company,
            k,
            format!("+7912{:07}", i % 50_000),
            format!("order-{i}"),
            status,
            at,
            at + 60_000
        ])
        .expect("insert");
    }
}

/// REJECTIONS 503 rows of `acme` over the same period.
fn insert_rejections(tx: &rusqlite::Transaction, acme: i64, key: i64) {
    let mut r = tx
        .prepare(
            "INSERT INTO rejections (company_id, api_key_id, phone, pool, reason, created_at) \
                 VALUES (?1, ?2, ?3, 'domestic', 'all lines busy', ?4)",
        )
        .expect("prepare");
    for i in 0..REJECTIONS {
        let at = NOW - DAYS * DAY_MS + i * (DAYS * DAY_MS / REJECTIONS);
        r.execute(rusqlite::params![
            acme,
            key,
            format!("+7912{:07}", i % 50_000),
            at
        ])
        .expect("insert");
    }
}

fn time_page(reader: &Reader, f: &ListFilter) -> (Duration, usize) {
    let bucket = ((f.to.0 - f.from.0) / DAY_MS).max(1).div_euclid(62).max(1) * DAY_MS;
    let started = Instant::now();
    let page = reader.verification_list(f).expect("list");
    let totals = reader
        .verification_totals((f.company_id, f.livemode), f.from, f.to, bucket)
        .expect("totals");
    std::hint::black_box(&totals);
    (started.elapsed(), page.rows.len())
}

/// The filters timed: the dashboard's common views of a 7-day and a
/// 30-day period.
fn cases(base: &ListFilter) -> Vec<(&'static str, ListFilter)> {
    let deep = ListCursor {
        created_at: UnixMillis(NOW - 6 * DAY_MS),
        sort_id: "ver_99999999999999999999999999".into(),
    };
    vec![
        ("7 days, no filter", base.clone()),
        (
            "7 days, status=completed",
            ListFilter {
                status: Some(Status::Completed),
                ..base.clone()
            },
        ),
        (
            "7 days, status=failed (with rejections)",
            ListFilter {
                status: Some(Status::Failed),
                ..base.clone()
            },
        ),
        (
            "7 days, phone",
            ListFilter {
                phone: Some("+79120012345".into()),
                ..base.clone()
            },
        ),
        (
            "7 days, client_ref",
            ListFilter {
                client_ref: Some("order-999000".into()),
                ..base.clone()
            },
        ),
        (
            "7 days, page deep in the period",
            ListFilter {
                after: Some(deep),
                ..base.clone()
            },
        ),
        (
            "30 days, no filter",
            ListFilter {
                from: UnixMillis(NOW - 30 * DAY_MS),
                ..base.clone()
            },
        ),
    ]
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.db");
    let started = Instant::now();
    let (acme, _) = fill(&path);
    println!(
        "filled {ROWS} verifications + {REJECTIONS} rejections (+{} of another company) in {:.1} s",
        ROWS / 10,
        started.elapsed().as_secs_f64()
    );
    let reader = Reader::open(&path).expect("reader");
    let base = ListFilter {
        company_id: acme,
        livemode: true,
        from: UnixMillis(NOW - 7 * DAY_MS),
        to: UnixMillis(NOW + DAY_MS),
        status: None,
        phone: None,
        client_ref: None,
        after: None,
        limit: 50,
    };
    let cases = cases(&base);
    println!(
        "{:<42} {:>6} {:>10} {:>10}",
        "case (page of 50 + totals)", "rows", "median", "worst"
    );
    for (name, f) in cases {
        let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
        let mut rows = 0;
        for _ in 0..RUNS {
            let (t, n) = time_page(&reader, &f);
            times.push(t);
            rows = n;
        }
        times.sort();
        println!(
            "{name:<42} {rows:>6} {:>8.2}ms {:>8.2}ms",
            times[RUNS / 2].as_secs_f64() * 1000.0,
            times[RUNS - 1].as_secs_f64() * 1000.0
        );
    }
}
