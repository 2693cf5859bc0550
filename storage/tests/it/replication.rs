//! What replication with Litestream asks of the storage layer (issue 16):
//! a bundled SQLite without the WAL-reset bug, and a database that still
//! opens, migrates and works after Litestream has added its own tables.
//!
//! Not for: failover of the service (the root package's `tests/it/standby`).

use crate::support::*;
use dialproof_storage::{Options, Replication, Store, WriteOp};

/// Two processes that write and checkpoint one WAL database (the service
/// and Litestream) need SQLite 3.51.3 or later: earlier versions could
/// corrupt the database when both reset the WAL.
#[test]
fn bundled_sqlite_has_the_wal_reset_fix() {
    let db = db();
    let version: String = db
        .sql()
        .query_row("SELECT sqlite_version()", [], |r| r.get(0))
        .expect("version");
    let parts: Vec<u32> = version
        .split('.')
        .map(|p| p.parse().expect("numeric version part"))
        .collect();
    assert!(
        parts.as_slice() >= [3, 51, 3].as_slice(),
        "bundled SQLite {version} is older than 3.51.3"
    );
}

/// Litestream 0.5 creates `_litestream_seq` and `_litestream_lock` in the
/// database it replicates (these statements are the ones it runs), so a
/// restored replica carries them: the store must open it, leave the
/// tables alone and keep working.
#[test]
fn litestream_tables_do_not_disturb_the_store() {
    let db = db();
    let store = db.store();
    insert(&store, db.row(1)).expect("insert before");
    store.shutdown();
    {
        let sql = db.sql();
        sql.execute_batch(
            "CREATE TABLE IF NOT EXISTS _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER);
             CREATE TABLE IF NOT EXISTS _litestream_lock (id INTEGER);
             INSERT INTO _litestream_seq (id, seq) VALUES (1, 42);",
        )
        .expect("litestream tables");
    }
    let store = db.store();
    insert(&store, db.row(2)).expect("insert after");
    let pending = read(&store, |r| r.pending_verifications())
        .expect("read")
        .expect("rows");
    assert_eq!(pending, vec![db.row(1), db.row(2)]);
    store.shutdown();
    assert_eq!(db.count("SELECT seq FROM _litestream_seq WHERE id = 1"), 42);
    let admin = db.admin();
    assert!(admin.list_companies().expect("companies").len() >= 2);
}

/// The WAL header's checkpoint sequence number and salts: a WAL reset
/// (RESTART or TRUNCATE followed by a write) changes them.
fn wal_header(wal: &std::path::Path) -> Option<[u8; 12]> {
    let bytes = std::fs::read(wal).ok()?;
    bytes.get(12..24).map(|h| h.try_into().expect("12 bytes"))
}

fn wal_len(wal: &std::path::Path) -> u64 {
    std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0)
}

/// Writes ~20 MiB of rows (past the size that makes the writer force a
/// checkpoint) while `holder` keeps a read transaction open, as Litestream
/// does between its own checkpoints. Returns the WAL headers seen and the
/// smallest step in the file's length between samples, and the holder's
/// connection: still open, like Litestream's, so that closing the store's
/// connections is not the last close (which makes SQLite checkpoint and
/// delete the WAL).
fn write_under_a_reader(db: &Db, store: &Store) -> (Vec<[u8; 12]>, i64, rusqlite::Connection) {
    let wal = db.path.with_extension("db-wal");
    let holder = db.sql();
    holder.execute_batch("BEGIN").expect("begin");
    let _: i64 = holder
        .query_row("SELECT count(*) FROM meta", [], |r| r.get(0))
        .expect("read");
    let (mut headers, mut min_step, mut last_len) = (Vec::new(), i64::MAX, wal_len(&wal));
    let info = "x".repeat(1500);
    for chunk in 0..26 {
        let (tx, rx) = std::sync::mpsc::channel();
        for n in chunk * 500..(chunk + 1) * 500 {
            let mut row = db.row(n);
            row.info = info.clone();
            let tx = tx.clone();
            store
                .submit(WriteOp::InsertVerification {
                    keyed: None,
                    row,
                    reply: Box::new(move |r| {
                        let _ = tx.send(r);
                    }),
                })
                .expect("submit");
        }
        for _ in 0..500 {
            rx.recv_timeout(REPLY_WAIT).expect("reply").expect("insert");
        }
        headers.extend(wal_header(&wal));
        let len = wal_len(&wal);
        min_step = min_step.min(len as i64 - last_len as i64);
        last_len = len;
    }
    holder.execute_batch("COMMIT").expect("end read");
    (headers, min_step, holder)
}

/// With `replication = Litestream` the writer never resets or truncates
/// the WAL: its header stays the same and the file never shrinks while
/// ~20 MiB go through it, and shutdown leaves it as it is for Litestream to
/// ship and checkpoint.
#[test]
fn under_litestream_the_writer_never_resets_or_truncates_the_wal() {
    let db = db();
    let wal = db.path.with_extension("db-wal");
    let store = db.store_with(Options {
        replication: Replication::Litestream,
        ..Options::default()
    });
    let (headers, min_step, holder) = write_under_a_reader(&db, &store);
    store.shutdown();
    assert!(headers.len() >= 26, "a WAL header after every chunk");
    assert!(
        headers.windows(2).all(|w| w[0] == w[1]),
        "the WAL was reset while Litestream's reader held it"
    );
    assert!(min_step >= 0, "the WAL file shrank by {} bytes", -min_step);
    assert!(
        wal_len(&wal) > 16 * 1024 * 1024,
        "shutdown truncated the WAL"
    );
    assert_eq!(wal_header(&wal), headers.last().copied());
    // What Litestream itself does at its checkpoint still works.
    let busy: i64 = holder
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
        .expect("checkpoint");
    assert_eq!(busy, 0);
    assert_eq!(wal_len(&wal), 0);
    assert_eq!(db.count("SELECT count(*) FROM verifications"), 13_000);
}

/// The same run without replication: the writer's own policy resets the
/// WAL once the reader lets go, and truncates it on shutdown. (Shows that
/// the assertions above can fail.)
#[test]
fn without_replication_the_writer_truncates_the_wal_on_shutdown() {
    let db = db();
    let wal = db.path.with_extension("db-wal");
    let store = db.store();
    let (headers, _, _holder) = write_under_a_reader(&db, &store);
    store.shutdown();
    assert!(headers.len() >= 26);
    assert_eq!(wal_len(&wal), 0, "shutdown left the WAL in place");
}

fn submit_heartbeat(store: &Store, at: i64) {
    let (tx, rx) = std::sync::mpsc::channel();
    store
        .submit(WriteOp::Heartbeat {
            at: dialproof_engine::time::UnixMillis(at),
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        })
        .expect("heartbeat");
    rx.recv_timeout(REPLY_WAIT)
        .expect("reply")
        .expect("heartbeat");
}

/// The heartbeat moves the newest committed moment forward without
/// traffic, never backward; rows written later count too.
#[test]
fn the_newest_committed_moment_is_the_heartbeat_or_the_newest_row() {
    let db = db();
    let store = db.store();
    let moment = |store: &Store| {
        read(store, |r| r.newest_committed_moment())
            .expect("read")
            .expect("moment")
    };
    assert_eq!(moment(&store), None, "an empty database has none");
    insert(&store, db.row(1)).expect("insert");
    assert_eq!(moment(&store), Some(T0));
    submit_heartbeat(&store, T0.0 + 5_000);
    submit_heartbeat(&store, T0.0 + 2_000);
    let mut row = db.row(2);
    row.created_at = T0.plus_millis(1_000);
    insert(&store, row).expect("insert");
    assert_eq!(moment(&store), Some(T0.plus_millis(5_000)));
    let mut row = db.row(3);
    row.created_at = T0.plus_millis(9_000);
    insert(&store, row).expect("insert");
    assert_eq!(moment(&store), Some(T0.plus_millis(9_000)));
    store.shutdown();
}

#[test]
fn leases_come_newest_first_until_told_to_stop() {
    let db = db();
    let store = db.store();
    for n in 0..5 {
        insert(&store, db.row(n)).expect("insert");
    }
    let mut seen = Vec::new();
    let count = read(&store, move |r| {
        let n = r.for_each_lease_newest_first(|number, at| {
            seen.push((number.to_owned(), at));
            seen.len() < 3
        });
        n.map(|n| (n, seen))
    })
    .expect("read")
    .expect("rows");
    let numbers: Vec<&str> = count.1.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(count.0, 3);
    assert_eq!(
        numbers,
        vec![
            db.row(4).dial_number,
            db.row(3).dial_number,
            db.row(2).dial_number
        ]
    );
    store.shutdown();
}
