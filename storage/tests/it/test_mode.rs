//! Test mode in storage: a verification's mode scopes its owner's reads
//! and transitions, and the retention purge deletes only ended test rows
//! (with their outbox rows and attempts) and test rejections, never a live
//! row nor a pending test one.
//!
//! Not for: the API's 404s (the service's `tests/it/testmode`).

use crate::support::*;
use dialproof_engine::time::UnixMillis;
use dialproof_engine::verification::{Event, Status};
use dialproof_storage::{NewRejection, Owner, WriteOp};
use std::sync::mpsc;

fn purge(store: &dialproof_storage::Store, before: UnixMillis) -> usize {
    let (tx, rx) = mpsc::channel();
    store
        .submit(WriteOp::PurgeTestRows {
            before,
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        })
        .expect("submit");
    rx.recv_timeout(REPLY_WAIT)
        .expect("purge reply")
        .expect("purged")
}

#[test]
fn an_owner_of_the_other_mode_neither_reads_nor_cancels() {
    let db = db();
    let store = db.store();
    let mut test = db.row(1);
    test.livemode = false;
    insert(&store, test.clone()).unwrap();
    let live_owner = Owner::from(db.company);
    let test_owner = Owner {
        company_id: db.company,
        livemode: false,
    };
    let r = db.reader();
    assert_eq!(r.owned_verification(&test.id, live_owner).unwrap(), None);
    let read = r.owned_verification(&test.id, test_owner).unwrap().unwrap();
    assert!(!read.livemode, "stored with its mode");
    let (tx, rx) = mpsc::channel();
    store
        .submit(WriteOp::Transition {
            id: test.id.clone(),
            owner: Some(live_owner),
            event: Event::Cancel { at: T0 },
            reply: Some(Box::new(move |r| {
                let _ = tx.send(r);
            })),
        })
        .unwrap();
    let t = rx.recv_timeout(REPLY_WAIT).unwrap().unwrap();
    assert_eq!(t.row, None, "a live owner does not find a test row");
    let still = r.owned_verification(&test.id, test_owner).unwrap().unwrap();
    assert_eq!(still.status, Status::Pending);
}

#[test]
fn the_purge_takes_ended_test_rows_only() {
    let db = db();
    let store = db.store();
    let mut ended_test = db.row(1);
    ended_test.livemode = false;
    let mut pending_test = db.row(2);
    pending_test.livemode = false;
    let ended_live = db.row(3);
    for row in [&ended_test, &pending_test, &ended_live] {
        insert(&store, row.clone()).unwrap();
    }
    // An expiry writes an outbox row: it must go with its verification.
    for id in [&ended_test.id, &ended_live.id] {
        let t = transition(
            &store,
            id,
            None,
            Event::Expire {
                at: T0.plus_seconds(60),
            },
        )
        .unwrap();
        assert!(t.changed && t.delivery_id.is_some());
    }
    for livemode in [false, true] {
        insert_rejection(
            &store,
            NewRejection {
                company_id: db.company,
                api_key_id: db.key,
                phone: "+79123456789".into(),
                pool: dialproof_engine::pool::Pool::Domestic,
                reason: "all lines busy".into(),
                at: T0,
                livemode,
            },
        )
        .unwrap();
    }
    assert_eq!(purge(&store, T0), 0, "nothing is older than T0");
    assert_eq!(
        purge(&store, T0.plus_seconds(1)),
        2,
        "one verification, one rejection"
    );
    let ids: Vec<String> = {
        let c = db.sql();
        let mut s = c
            .prepare("SELECT id FROM verifications ORDER BY id")
            .unwrap();
        s.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(ids, [pending_test.id.clone(), ended_live.id.clone()]);
    assert_eq!(db.count("SELECT COUNT(*) FROM webhook_deliveries"), 1);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM rejections WHERE livemode = 1"),
        1
    );
    assert_eq!(db.count("SELECT COUNT(*) FROM rejections"), 1);
    assert_eq!(purge(&store, T0.plus_seconds(1)), 0, "done");
}

/// A design choice: the dashboard's totals of either mode are counted from
/// indexes alone (migration 6's partial indexes of test rows, covering),
/// so a company's live totals never read its rows, however many are test
/// rows or live.
#[test]
fn the_test_counts_of_the_totals_read_covering_partial_indexes() {
    let db = db();
    drop(db.store());
    for sql in [
        "SELECT COUNT(*) FROM verifications WHERE company_id = 1 AND livemode = 0 \
         AND created_at >= 1 AND created_at < 2",
        "SELECT COUNT(*) FROM verifications WHERE company_id = 1 AND livemode = 0 \
         AND status = 'completed' AND created_at >= 1 AND created_at < 2",
        "SELECT COUNT(*) FROM rejections WHERE company_id = 1 AND livemode = 0 \
         AND created_at >= 1 AND created_at < 2",
    ] {
        let plan = db.query_plan(sql, []);
        assert!(
            plan.contains("COVERING INDEX") && plan.contains("_test_company"),
            "the totals' test counts must read only a covering partial index: {sql}\n{plan}"
        );
    }
}
