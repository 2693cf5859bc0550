//! Upgrades (tools/deploy/README.md, "Upgrading"): every missing migration is applied in
//! one transaction, so a failed upgrade leaves the file at the version it
//! had; a newer release's file is refused with the one-line message.

use dialproof_storage::{Admin, StorageError};
use rusqlite::Connection;

fn version(path: &std::path::Path) -> i64 {
    Connection::open(path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

fn index_exists(path: &std::path::Path, name: &str) -> bool {
    Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?1",
            [name],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        == 1
}

#[test]
fn a_failed_upgrade_leaves_the_file_at_its_old_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dialproof.db");
    drop(Admin::open(&path).expect("fresh database"));
    // Back to a version-1 file (migrations 4, 3 and 2 undone, newest
    // first), with a table in the way of migration 4: 2 and 3 apply, then
    // 4 fails.
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE idempotency_keys;
         ALTER TABLE verifications DROP COLUMN idempotency_key;
         DROP INDEX verifications_pending_dial;
         DROP INDEX verifications_company_created;
         DROP INDEX verifications_company_status;
         DROP INDEX verifications_company_phone;
         DROP INDEX verifications_company_client_ref;
         DROP INDEX rejections_company_phone;
         ALTER TABLE api_keys DROP COLUMN deleted_at;
         CREATE INDEX verifications_company_created ON verifications(company_id, created_at);
         CREATE TABLE idempotency_keys (x INTEGER);
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);
    let err = Admin::open(&path).err().expect("migration 4 must fail");
    assert!(
        err.to_string().contains("migration 4 failed"),
        "the error names the migration: {err}"
    );
    assert_eq!(
        version(&path),
        1,
        "one transaction for the whole upgrade: nothing of migrations 2 and 3 stays"
    );
    assert!(
        !index_exists(&path, "verifications_pending_dial")
            && !index_exists(&path, "verifications_company_status"),
        "migrations 2 and 3 were rolled back with 4"
    );
}

#[test]
fn a_newer_release_database_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dialproof.db");
    let newer = dialproof_storage::schema_version() + 3;
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();
    assert_eq!(
        dialproof_storage::schema_version_of(&path).unwrap(),
        Some(newer)
    );
    match Admin::open(&path) {
        Err(StorageError::Corrupt(m)) => assert_eq!(
            m,
            dialproof_storage::schema_newer_message(newer, dialproof_storage::schema_version())
        ),
        other => panic!("expected the refusal, got {:?}", other.err()),
    }
    assert_eq!(version(&path), newer, "the file is not touched");
    assert_eq!(
        dialproof_storage::schema_version_of(&dir.path().join("none.db")).unwrap(),
        None
    );
}
