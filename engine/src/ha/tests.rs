//! Every transition of [`Ha`] and the edges of its clock.

use super::*;

const T: i64 = 1_800_000_000_000;
const TTL: i64 = 5_000;

fn at(ms: i64) -> UnixMillis {
    UnixMillis(T + ms)
}

fn node() -> Ha {
    Ha::new(HaTiming::new(TTL), at(0))
}

/// A node that won at `won` with a grant sent at `granted`.
fn winner(granted: i64, won: i64) -> Ha {
    let mut h = node();
    assert_eq!(h.poll(at(0)), Some(Action::GrantLease));
    h.handle(
        at(granted),
        Input::LeaseGranted {
            id: 7,
            sent_at: at(granted),
        },
    );
    assert_eq!(h.poll(at(granted)), Some(Action::TryAcquire { lease: 7 }));
    h.handle(at(won), Input::ElectionWon);
    h
}

/// A primary whose last successful renewal went out at `granted`.
fn primary(granted: i64) -> Ha {
    let mut h = winner(granted, granted);
    assert_eq!(h.poll(at(granted)), Some(Action::StartPromotion));
    h.handle(at(granted), Input::PromotionFinished);
    assert_eq!(h.role(), Role::Primary);
    h.take_events();
    h
}

#[test]
fn timing_follows_the_ttl() {
    let t = HaTiming::new(5_000);
    assert_eq!(
        (t.margin_ms, t.renew_every_ms, t.retry_ms),
        (1_000, 1_666, 250)
    );
    assert_eq!(t.campaign_every_ms, 1_000);
    // A short TTL keeps a margin of half a second.
    assert_eq!(HaTiming::new(1_000).margin_ms, 500);
}

#[test]
fn a_new_node_is_a_standby_that_campaigns_at_once() {
    let mut h = node();
    assert_eq!(h.role(), Role::Standby);
    assert_eq!(h.next_wakeup(), Some(at(0)));
    assert_eq!(h.poll(at(0)), Some(Action::GrantLease));
    // One grant in flight: nothing more until it is answered.
    assert_eq!(h.poll(at(10_000)), None);
    assert_eq!(h.next_wakeup(), None);
}

#[test]
fn winning_asks_for_a_promotion_from_the_replica_and_keeps_the_lease() {
    let mut h = winner(100, 120);
    assert_eq!(h.role(), Role::Promoting);
    assert_eq!(h.take_events(), vec![Event::ElectionWon]);
    assert_eq!(h.poll(at(120)), Some(Action::StartPromotion));
    assert_eq!(h.poll(at(120)), None);
    // The lease counts from the grant's send, not from the win.
    assert_eq!(h.fence_deadline(), Some(at(100 + 4_000)));
    assert_eq!(h.next_wakeup(), Some(at(100 + 1_666)));
    assert_eq!(h.poll(at(100 + 1_665)), None);
    assert_eq!(
        h.poll(at(100 + 1_666)),
        Some(Action::KeepAlive { lease: 7 })
    );
    h.handle(at(2_000), Input::PromotionFinished);
    assert_eq!(h.role(), Role::Primary);
    assert_eq!(
        h.take_events(),
        vec![Event::Promoted {
            took_ms: 2_000 - 120
        }]
    );
}

/// A node that lost the election at 10 ms.
fn loser() -> Ha {
    let mut h = node();
    h.poll(at(0));
    h.handle(
        at(5),
        Input::LeaseGranted {
            id: 3,
            sent_at: at(0),
        },
    );
    h.poll(at(5));
    h.handle(at(10), Input::ElectionLost);
    h
}

#[test]
fn losing_waits_for_the_deletion_or_the_next_campaign() {
    let mut h = loser();
    assert_eq!(h.role(), Role::Standby);
    assert_eq!(h.take_events(), vec![Event::ElectionLost]);
    assert_eq!(h.fence_deadline(), None);
    assert_eq!(h.next_wakeup(), Some(at(1_010)));
    assert_eq!(h.poll(at(1_009)), None);
    assert_eq!(h.poll(at(1_010)), Some(Action::GrantLease));
    // A deletion seen while idle campaigns at once.
    let mut h = loser();
    h.handle(at(300), Input::KeyDeleted);
    assert_eq!(h.poll(at(300)), Some(Action::GrantLease));
}

#[test]
fn a_failed_grant_or_acquire_retries_after_the_retry_interval() {
    let mut h = node();
    h.poll(at(0));
    h.handle(at(40), Input::CallFailed);
    assert_eq!(h.role(), Role::Standby);
    assert_eq!(h.poll(at(289)), None);
    assert_eq!(h.poll(at(290)), Some(Action::GrantLease));
    h.handle(
        at(300),
        Input::LeaseGranted {
            id: 1,
            sent_at: at(290),
        },
    );
    assert_eq!(h.poll(at(300)), Some(Action::TryAcquire { lease: 1 }));
    h.handle(at(310), Input::CallFailed);
    assert_eq!(h.next_wakeup(), Some(at(560)));
    assert!(h.take_events().is_empty(), "a failed call is no election");
}

#[test]
fn the_fence_deadline_counts_from_the_send_of_the_last_successful_renewal() {
    let mut h = primary(0);
    assert_eq!(h.poll(at(1_666)), Some(Action::KeepAlive { lease: 7 }));
    // The reply comes late: the lease is counted from the send.
    h.handle(at(3_000), Input::Renewed { sent_at: at(1_666) });
    assert_eq!(h.fence_deadline(), Some(at(1_666 + 4_000)));
    assert_eq!(h.lease_age_ms(at(3_000)), Some(3_000 - 1_666));
    // An older reply cannot move the deadline back.
    assert_eq!(h.poll(at(3_332)), Some(Action::KeepAlive { lease: 7 }));
    h.handle(at(3_400), Input::Renewed { sent_at: at(1_000) });
    assert_eq!(h.fence_deadline(), Some(at(5_666)));
}

#[test]
fn a_primary_that_cannot_renew_fences_at_ttl_minus_margin_then_stops() {
    let mut h = primary(0);
    assert_eq!(h.poll(at(1_666)), Some(Action::KeepAlive { lease: 7 }));
    h.handle(at(1_700), Input::RenewFailed);
    assert_eq!(h.next_wakeup(), Some(at(1_950)));
    assert_eq!(h.poll(at(1_949)), None);
    assert_eq!(h.poll(at(1_950)), Some(Action::KeepAlive { lease: 7 }));
    // A keep-alive still in flight does not hold the fence back.
    assert_eq!(h.next_wakeup(), Some(at(4_000)));
    assert_eq!(h.poll(at(3_999)), None);
    assert_eq!(h.role(), Role::Primary);
    assert_eq!(h.poll(at(4_000)), Some(Action::Fence));
    assert_eq!(h.role(), Role::Fenced);
    assert_eq!(
        h.take_events(),
        vec![Event::Fenced {
            lease_age_ms: 4_000
        }]
    );
    assert_eq!(h.poll(at(4_000)), Some(Action::Stop { revoke: Some(7) }));
    assert_eq!(h.poll(at(4_000)), None);
    // The late reply to the keep-alive changes nothing: fenced is final.
    h.handle(at(4_100), Input::Renewed { sent_at: at(1_950) });
    assert_eq!(h.role(), Role::Fenced);
    assert_eq!(h.fence_deadline(), None);
}

#[test]
fn the_fence_comes_before_etcd_could_expire_the_lease() {
    for ttl in [1_000, 2_000, 5_000, 10_000, 60_000] {
        let t = HaTiming::new(ttl);
        let mut h = Ha::new(t, at(0));
        h.poll(at(0));
        h.handle(
            at(0),
            Input::LeaseGranted {
                id: 1,
                sent_at: at(0),
            },
        );
        h.poll(at(0));
        h.handle(at(0), Input::ElectionWon);
        let deadline = h.fence_deadline().expect("holding");
        assert!(
            deadline.0 < at(ttl).0,
            "fence before the TTL elapses since the send (ttl {ttl})"
        );
        assert!(
            t.renew_every_ms < t.ttl_ms - t.margin_ms,
            "a renewal fits before the fence"
        );
    }
}

#[test]
fn a_fenced_node_rejoins_as_a_standby_and_promotes_only_through_a_restore() {
    let mut h = primary(0);
    h.handle(at(100), Input::LeaseGone);
    assert_eq!(h.role(), Role::Fenced);
    assert_eq!(h.poll(at(100)), Some(Action::Fence));
    assert_eq!(h.poll(at(100)), Some(Action::Stop { revoke: Some(7) }));
    // Until the service stopped, no campaign.
    assert_eq!(h.poll(at(10_000)), None);
    h.handle(at(10_000), Input::KeyDeleted);
    assert_eq!(h.role(), Role::Fenced);
    h.handle(at(10_500), Input::Stopped);
    assert_eq!(h.role(), Role::Standby);
    assert_eq!(h.poll(at(10_500)), Some(Action::GrantLease));
    h.handle(
        at(10_510),
        Input::LeaseGranted {
            id: 9,
            sent_at: at(10_500),
        },
    );
    h.poll(at(10_510));
    h.handle(at(10_520), Input::ElectionWon);
    // Its way back is the promotion, which restores the replica.
    assert_eq!(h.poll(at(10_520)), Some(Action::StartPromotion));
}

#[test]
fn a_deleted_key_fences_the_holder_at_once() {
    let mut h = primary(0);
    h.handle(at(500), Input::KeyDeleted);
    assert_eq!(h.poll(at(500)), Some(Action::Fence));
    assert_eq!(h.take_events(), vec![Event::Fenced { lease_age_ms: 500 }]);
}

#[test]
fn a_lease_lost_while_promoting_fences_before_the_promotion_is_asked_for() {
    // The acquire took so long that the lease is in doubt on the win.
    let mut h = winner(0, 4_500);
    assert_eq!(h.poll(at(4_500)), Some(Action::Fence));
    assert_eq!(h.poll(at(4_500)), Some(Action::Stop { revoke: Some(7) }));
    // A lease that ends mid-promotion fences the half-started service.
    let mut h = winner(0, 0);
    assert_eq!(h.poll(at(0)), Some(Action::StartPromotion));
    assert_eq!(h.poll(at(4_000)), Some(Action::Fence));
    h.handle(at(4_100), Input::PromotionFinished);
    assert_eq!(
        h.role(),
        Role::Fenced,
        "a late finish cannot undo the fence"
    );
}

#[test]
fn a_failed_promotion_hands_the_key_back_without_a_fence_event() {
    let mut h = winner(0, 0);
    h.poll(at(0));
    h.take_events();
    h.handle(at(900), Input::PromotionFailed);
    assert_eq!(h.poll(at(900)), Some(Action::Fence));
    assert_eq!(h.poll(at(900)), Some(Action::Stop { revoke: Some(7) }));
    assert!(h.take_events().is_empty());
    h.handle(at(950), Input::Stopped);
    assert_eq!(h.poll(at(950)), Some(Action::GrantLease));
}

#[test]
fn inputs_that_do_not_fit_change_nothing() {
    let mut h = node();
    for input in [
        Input::ElectionWon,
        Input::ElectionLost,
        Input::Renewed { sent_at: at(0) },
        Input::RenewFailed,
        Input::LeaseGone,
        Input::PromotionFinished,
        Input::PromotionFailed,
        Input::Stopped,
        Input::LeaseGranted {
            id: 1,
            sent_at: at(0),
        },
    ] {
        h.handle(at(0), input);
        assert_eq!(h.role(), Role::Standby, "{input:?}");
    }
    assert_eq!(h.poll(at(0)), Some(Action::GrantLease));
    // A primary ignores a second win and a promotion's finish.
    let mut h = primary(0);
    h.handle(at(10), Input::ElectionWon);
    h.handle(at(10), Input::PromotionFinished);
    assert_eq!(h.role(), Role::Primary);
    assert!(h.take_events().is_empty());
    // A renewal reply with none in flight is ignored.
    h.handle(at(20), Input::Renewed { sent_at: at(20) });
    assert_eq!(h.fence_deadline(), Some(at(4_000)));
}

#[test]
fn a_service_that_dies_under_a_primary_hands_the_key_back() {
    let mut h = primary(0);
    h.handle(at(700), Input::ServiceDied);
    assert_eq!(h.role(), Role::Fenced);
    assert_eq!(h.poll(at(700)), Some(Action::Fence));
    assert_eq!(h.poll(at(700)), Some(Action::Stop { revoke: Some(7) }));
    assert!(h.take_events().is_empty(), "no lease was in doubt");
    // A standby's own service cannot die: nothing changes.
    let mut h = node();
    h.handle(at(0), Input::ServiceDied);
    assert_eq!(h.role(), Role::Standby);
}
