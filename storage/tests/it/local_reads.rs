//! `Store::read_here`: a point read on the calling thread, with that
//! thread's own connection per store (the service's GET of one
//! verification).
//!
//! Not for: the reader threads' queue (`Store::read`, tested with the
//! other queries) or what the API answers (the service's tests).

use crate::support::*;
use dialproof_storage::{FailPoints, Options, StorageError};

#[test]
fn a_committed_row_is_read_on_the_calling_thread_and_unknown_ids_are_none() {
    let db = db();
    let store = db.store();
    insert(&store, db.row(1)).expect("insert");
    let row = db.row(1);
    let got = store
        .read_here(|r| r.verification(&row.id, db.company))
        .expect("read");
    assert_eq!(got.map(|r| r.id), Some(row.id.clone()));
    // Another company's id reads exactly like an unknown one.
    let other = store
        .read_here(|r| r.verification(&row.id, db.other_company))
        .expect("read");
    assert!(other.is_none());
    // A second insert is seen by the same thread's (reused) connection.
    insert(&store, db.row(2)).expect("insert");
    let second = store
        .read_here(|r| r.verification(&db.row(2).id, db.company))
        .expect("read");
    assert!(
        second.is_some(),
        "a later commit is visible to the kept connection"
    );
    store.shutdown();
    assert_eq!(
        store
            .read_here(|r| r.verification(&row.id, db.company))
            .err(),
        Some(StorageError::Closed)
    );
}

#[test]
fn one_thread_reading_several_stores_reads_each_its_own_database() {
    let dbs: Vec<_> = (0..6).map(|_| db()).collect();
    let stores: Vec<_> = dbs.iter().map(|d| d.store()).collect();
    for (n, (d, s)) in dbs.iter().zip(&stores).enumerate() {
        insert(s, d.row(n)).expect("insert");
    }
    // More stores than one thread keeps connections for, twice round: an
    // evicted connection is reopened, never confused with another store's.
    for _ in 0..2 {
        for (n, (d, s)) in dbs.iter().zip(&stores).enumerate() {
            for m in 0..6 {
                let found = s
                    .read_here(|r| r.verification(&d.row(m).id, d.company))
                    .expect("read");
                assert_eq!(found.is_some(), m == n, "store {n}, row {m}");
            }
        }
    }
}

#[test]
fn the_reader_fail_point_fails_a_read_here_too() {
    let db = db();
    let failpoints = FailPoints::from_spec("reader.query=1*error").expect("fail point spec");
    let store = db.store_with(Options {
        failpoints,
        ..Options::default()
    });
    insert(&store, db.row(1)).expect("insert");
    let first = store.read_here(|r| r.verification(&db.row(1).id, db.company));
    assert_eq!(first.err(), Some(StorageError::Injected("reader.query")));
    let second = store.read_here(|r| r.verification(&db.row(1).id, db.company));
    assert!(second.expect("the fail point fired once").is_some());
}

#[test]
fn the_view_read_in_place_is_the_stored_rows_view_for_its_owner_only() {
    use dialproof_storage::Owner;
    let db = db();
    let store = db.store();
    let mut odd = db.row(1);
    // Text that JSON must escape and that is not ASCII, so a borrowed
    // column is shown exactly as stored.
    odd.client_ref = "ref \"quoted\" \\ back".into();
    odd.info = "тариф\nA ✓".into();
    insert(&store, odd.clone()).expect("insert");
    insert(&store, db.row(2)).expect("insert");
    let completed = transition(
        &store,
        &db.row(2).id,
        None,
        call(T0.plus_seconds(5), "+79161234567"),
    )
    .expect("complete")
    .row
    .expect("the completed row");
    let owner = Owner {
        company_id: db.company,
        livemode: true,
    };
    for row in [odd, completed] {
        let full = store
            .read_here(|r| r.owned_verification(&row.id, owner))
            .expect("read")
            .expect("found");
        let shown = store
            .read_here(|r| r.owned_verification_view(&row.id, owner, |v| v == full.view()))
            .expect("read");
        assert_eq!(
            shown,
            Some(true),
            "{}: the view differs from the row's",
            row.id
        );
    }
    // Another company's, or the other mode's, reads like an unknown id.
    let id = db.row(1).id;
    for other in [
        Owner {
            company_id: db.other_company,
            livemode: true,
        },
        Owner {
            company_id: db.company,
            livemode: false,
        },
    ] {
        let shown = store
            .read_here(|r| r.owned_verification_view(&id, other, |_| ()))
            .expect("read");
        assert_eq!(shown, None);
    }
    let unknown = store
        .read_here(|r| r.owned_verification_view("ver_nope", owner, |_| ()))
        .expect("read");
    assert_eq!(unknown, None);
    store.shutdown();
}
