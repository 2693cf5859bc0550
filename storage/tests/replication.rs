//! What replication with Litestream asks of the storage layer (issue 16):
//! a bundled SQLite without the WAL-reset bug, and a database that still
//! opens, migrates and works after Litestream has added its own tables.

mod common;

use common::*;

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
