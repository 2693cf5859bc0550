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

/// Migration 7 moves an outbox row's mode into the row; the rows written
/// before it take their verification's mode. Without that backfill a test
/// verification's webhook would list with the live ones and count in the
/// live backlog.
#[test]
fn outbox_rows_from_before_migration_7_take_their_verifications_mode() {
    use crate::support::{db, insert, transition, T0};
    use dialproof_engine::verification::Event;
    use dialproof_storage::DeliveryFilter;

    let db = db();
    let store = db.store();
    let live = db.row(1);
    let mut test = db.row(2);
    test.livemode = false;
    for row in [&live, &test] {
        insert(&store, row.clone()).unwrap();
        let expired = Event::Expire {
            at: T0.plus_seconds(60),
        };
        let t = transition(&store, &row.id, None, expired).unwrap();
        assert!(t.delivery_id.is_some(), "an outbox row for {}", row.id);
    }
    drop(store);
    // Back to a version-6 file: the outbox rows as that schema held them.
    db.sql()
        .execute_batch(
            "ALTER TABLE webhook_deliveries DROP COLUMN livemode; PRAGMA user_version = 6;",
        )
        .unwrap();
    let admin = db.admin();
    assert_eq!(version(&db.path), dialproof_storage::schema_version());
    let listed = |livemode: bool| -> Vec<(String, bool)> {
        let filter = DeliveryFilter {
            livemode: Some(livemode),
            limit: 10,
            ..DeliveryFilter::default()
        };
        let log = admin.delivery_log(&filter).unwrap();
        log.into_iter()
            .map(|e| (e.delivery.verification_id, e.delivery.livemode))
            .collect()
    };
    assert_eq!(
        listed(false),
        [(test.id.clone(), false)],
        "migration 7 gives a test verification's outbox row the test mode"
    );
    assert_eq!(listed(true), [(live.id.clone(), true)]);
    let pending = db.reader().undelivered().unwrap();
    assert_eq!((pending.count, pending.test_count), (1, 1));
}
