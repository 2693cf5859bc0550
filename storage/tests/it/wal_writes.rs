//! How the writer's commits reach the WAL file: each in one write, not
//! two per frame as SQLite writes them (`storage/src/wal_vfs.rs`).
//!
//! Not for: what a crash keeps (`crate::recovery`, whose child aborts
//! right after a commit), or the WAL's size (`crate::wal`).

use crate::support::*;

#[test]
fn each_commit_reaches_the_wal_file_in_one_write() {
    const COMMITS: usize = 50;
    let db = db();
    let store = db.store();
    // The first commit into a fresh WAL writes the WAL's header first,
    // which SQLite syncs before any frame: two writes, once per WAL
    // restart (and none comes within these commits: the checkpoint thread
    // runs every 64 batches).
    insert(&store, db.row(COMMITS)).expect("insert");
    let before = store.stats();
    // One at a time, so that each is a batch and a commit of its own: a
    // row and its five index entries, at least two frames each.
    for n in 0..COMMITS {
        insert(&store, db.row(n)).expect("insert");
    }
    let after = store.stats();
    let batches = after.batches_committed - before.batches_committed;
    let asked = after.wal_writes_asked - before.wal_writes_asked;
    let issued = after.wal_writes_issued - before.wal_writes_issued;
    assert_eq!(batches, COMMITS as u64, "one commit per awaited insert");
    assert!(
        asked >= 4 * batches,
        "SQLite asked {asked} writes for {batches} commits: fewer than a header and a page \
         for two frames each, so this no longer measures what it says"
    );
    assert_eq!(
        issued, batches,
        "design choice (storage/src/wal_vfs.rs): the writer's frames of one commit reach the \
         WAL file in one write; {batches} commits asked {asked} writes and made {issued}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM verifications"),
        COMMITS as i64 + 1,
        "every commit is readable from another connection"
    );
    store.shutdown();
}
