//! The page size of the database file: a file this build creates uses
//! small pages (a create's random index entries then write less to the
//! WAL); a file created before keeps its own, since WAL mode cannot change
//! it, and works as before.
//!
//! Not for: what the WAL's size does (`crate::wal`).

use crate::support::*;
use dialproof_storage::Admin;

fn page_size(conn: &rusqlite::Connection) -> i64 {
    conn.pragma_query_value(None, "page_size", |r| r.get(0))
        .expect("page_size")
}

#[test]
fn a_new_database_uses_one_kib_pages() {
    // Created by the operator CLI's connection (as `support::db` does)...
    let db = db();
    assert_eq!(
        page_size(&db.sql()),
        1024,
        "a database this build creates uses 1 KiB pages (the design choice in \
         storage's conn.rs, NEW_DATABASE_PAGE_BYTES); a change to it must be deliberate"
    );
    // ...and by the service's store on its first start.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dialproof.db");
    drop(dialproof_storage::Store::open(&path, Default::default()).expect("store open"));
    let conn = rusqlite::Connection::open(&path).expect("sqlite open");
    assert_eq!(
        page_size(&conn),
        1024,
        "the store's first start creates 1 KiB pages"
    );
}

#[test]
fn a_database_created_with_four_kib_pages_keeps_them_and_works() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dialproof.db");
    {
        // An earlier build's file: SQLite's default page size, in WAL mode.
        let conn = rusqlite::Connection::open(&path).expect("sqlite open");
        conn.pragma_update(None, "page_size", 4096)
            .expect("page_size");
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        conn.execute_batch("CREATE TABLE earlier (a INTEGER)")
            .expect("a first page");
    }
    let (company, key) = acme(&Admin::open(&path).expect("admin open"));
    let store = dialproof_storage::Store::open(&path, Default::default()).expect("store open");
    for n in 0..200 {
        let id = format!("ver_{n:026}");
        insert(&store, pending_row(&id, company, key, n)).expect("insert");
    }
    drop(store);
    let conn = rusqlite::Connection::open(&path).expect("sqlite open");
    assert_eq!(
        page_size(&conn),
        4096,
        "an existing file keeps its page size"
    );
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM verifications", [], |r| r.get(0))
        .expect("count");
    assert_eq!(rows, 200);
}
