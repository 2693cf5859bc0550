//! Upgrades (tools/deploy/README.md, "Upgrading"; README, "Operations"):
//! databases written by the
//! first release (schema migration 1, commit d600e08) and by the previous
//! release (migration 3, commit accf345, before Idempotency-Key) are
//! checked, migrated on start and served: an existing verification reads
//! back as the older release left it (its TTL long past, so expired; a
//! completed one keeps its caller), and a new one is created.
//!
//! The fixtures in tests/fixtures/ were written by the older releases'
//! own binaries, built from their commits, with
//! tests/fixtures/make-fixture.sh; each JSON file names the commit and what
//! the test reads back (the API token is the fixture's own).

use crate::support::*;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(version: u32) -> (PathBuf, Value) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("schema-v{version}.json")))
            .expect("fixture json"),
    )
    .expect("fixture json parses");
    assert_eq!(meta["schema_version"], version);
    (dir.join(format!("schema-v{version}.db")), meta)
}

fn user_version(path: &std::path::Path) -> i64 {
    // Read-only: opening the committed fixture read-write would create an
    // empty file where one is missing.
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 0,
        "fixture {} is missing or empty: the .db fixtures are committed \
         (.gitignore excepts tests/fixtures/*.db); regenerate with \
         tests/fixtures/make-fixture.sh",
        path.display()
    );
    // `immutable`: no -shm or -wal files either (nothing writes it).
    let uri = format!("file:{}?immutable=1", path.display());
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_URI;
    rusqlite::Connection::open_with_flags(uri, flags)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

/// Serves a copy of the fixture and reads it back.
fn serve_fixture(version: u32) {
    let (db, meta) = fixture(version);
    assert_eq!(
        user_version(&db),
        i64::from(version),
        "the fixture's own schema"
    );
    let mut server = Server::prepare(&pools(10, 10));
    std::fs::create_dir_all(&server.data_dir).unwrap();
    let copy = server.data_dir.join("dialproof.db");
    std::fs::copy(&db, &copy).expect("copying the fixture");

    let check = std::process::Command::new(BIN)
        .arg("--config")
        .arg(&server.config_path)
        .arg("check")
        .output()
        .expect("check");
    let current = dialproof_storage::schema_version();
    let want = format!(
        "database {}: schema version {version}, migrated to {current} on start (one transaction)",
        copy.display()
    );
    assert!(
        String::from_utf8_lossy(&check.stdout)
            .lines()
            .any(|l| l == want),
        "check names the migration: {}",
        String::from_utf8_lossy(&check.stdout)
    );

    server.launch();
    let token = meta["token"].as_str().expect("token");
    let pending = meta["pending_id"].as_str().expect("pending_id");
    let old = server.get(token, pending);
    assert_eq!(old.status, 200, "{}", old.text());
    let old = old.json();
    assert_eq!(old["verification_id"], pending);
    assert_eq!(old["phone"], "+79123456789");
    assert_eq!(old["client_ref"], "fixture");
    assert_eq!(
        old["status"], "expired",
        "its TTL passed while the file lay here"
    );
    if let Some(completed) = meta["completed_id"].as_str() {
        let done = server.get(token, completed).json();
        assert_eq!(done["status"], "completed");
        assert_eq!(done["caller_id_received"], "+79161234567");
    }

    let new = server.create_ok(token, &body(UK_PHONE));
    assert_eq!(new["status"], "pending");
    assert_eq!(
        server
            .get(token, new["verification_id"].as_str().unwrap())
            .status,
        200
    );
    server.stop();
    assert_eq!(user_version(&copy), current, "migrated forward on start");
    status_checks_rewritten(&copy);
}

/// Migration 8 rewrote the older release's `IN` lists as equalities (a
/// design choice for the writer's speed; see
/// storage/src/migration_status_checks.rs), and the file is intact.
fn status_checks_rewritten(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let definition = |table: &str| -> String {
        conn.query_row(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get(0),
        )
        .unwrap()
    };
    for (table, want) in [
        (
            "verifications",
            "CHECK (status = 'pending' OR status = 'completed'",
        ),
        (
            "webhook_deliveries",
            "CHECK (state = 'pending' OR state = 'delivered'",
        ),
    ] {
        let sql = definition(table);
        assert!(
            sql.contains(want) && !sql.contains(" IN ('pending'"),
            "design choice: migration 8 writes {table}'s status CHECK as equalities: {sql}"
        );
    }
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn the_first_release_schema_is_migrated_and_served() {
    serve_fixture(1);
}

#[test]
fn the_previous_release_schema_is_migrated_and_served() {
    serve_fixture(3);
}
