//! Unit tests of the number health rule, and the simulation of a day of
//! healthy numbers.

use super::*;
use crate::sip::rng::SplitMix64;

const T0: UnixMillis = UnixMillis(1_700_000_000_000);
const LEASE_MS: i64 = 60_000;
const D: Pool = Pool::Domestic;

#[test]
fn k_follows_the_rule_and_its_bounds() {
    // (1-p)^K < 1e-4 / L, K in 8..=60.
    for (p, per_day, want) in [
        (0.9, 1_000.0, Some(8)),
        (0.75, 1_000.0, Some(12)),
        (0.6, 200_000.0, Some(24)),
        (0.3, 200_000.0, None),
        (0.3, 100.0, Some(39)),
        (0.0, 100.0, None),
        (1.0, 100.0, Some(K_MIN)),
    ] {
        assert_eq!(k_for(p, per_day), want, "p {p}, {per_day} leases a day");
        if let Some(k) = want.filter(|k| *k > K_MIN) {
            let chance = (1.0 - p).powi(k as i32) * per_day;
            let before = (1.0 - p).powi(k as i32 - 1) * per_day;
            assert!(chance < 1e-4 && before >= 1e-4, "K {k} is the smallest");
        }
    }
}

/// A pool of `healthy` numbers plus one `dead` that the provider lost.
fn pool(healthy: usize) -> (NumberHealth, Vec<String>) {
    let h = NumberHealth::new();
    let numbers: Vec<String> = (0..=healthy).map(|i| format!("+7495{i:07}")).collect();
    (h, numbers)
}

#[test]
fn a_dead_number_is_quarantined_after_k_uncalled_leases_and_released() {
    let (mut h, numbers) = pool(3);
    let dead = numbers[3].clone();
    let mut now = T0;
    let mut quarantined_at_round = None;
    for round in 0..40 {
        for n in &numbers {
            h.on_lease(n, D, now);
        }
        now = UnixMillis(now.0 + LEASE_MS);
        for n in &numbers[..3] {
            h.on_invite(n, true);
            assert_eq!(h.on_end(n, D, Ending::Completed, now), None);
        }
        if let Some(q) = h.on_end(&dead, D, Ending::Expired, now) {
            assert_eq!(q.number, dead);
            let k = q.threshold.k.expect("a decision");
            assert_eq!(q.uncalled_in_a_row, k, "quarantined at exactly K");
            quarantined_at_round = Some(round);
            break;
        }
    }
    let round = quarantined_at_round.expect("the dead number is quarantined");
    // No decision before the pool had ENDED_LEASES_MIN ended leases.
    assert!((round + 1) * 4 >= ENDED_LEASES_MIN, "round {round}");
    let quarantined: Vec<String> = h.quarantined().map(|n| n.to_string()).collect();
    assert_eq!(quarantined, vec![dead.clone()]);
    assert!(h.release(&dead));
    assert_eq!(h.quarantined().count(), 0);
    assert_eq!(h.counters(&dead).unwrap().uncalled_in_a_row, 0);
    assert!(!h.release(&dead), "releasing twice is a no-op");
}

#[test]
fn any_invite_proves_the_number_rings() {
    let (mut h, numbers) = pool(3);
    let n = &numbers[0];
    h.on_lease(n, D, T0);
    h.on_end(n, D, Ending::Expired, T0);
    h.on_lease(n, D, T0);
    // Called (a withheld caller, say) but not completed: not uncalled.
    h.on_invite(n, true);
    h.on_end(n, D, Ending::Expired, T0);
    let c = h.counters(n).unwrap();
    assert_eq!((c.expired_uncalled, c.uncalled_in_a_row), (1, 0));
    h.on_lease(n, D, T0);
    h.on_end(n, D, Ending::Expired, T0);
    h.on_invite(n, false);
    let c = h.counters(n).unwrap();
    assert_eq!((c.stray_calls, c.uncalled_in_a_row), (1, 0));
    // Cancels and line failures tell nothing.
    h.on_lease(n, D, T0);
    h.on_end(n, D, Ending::Neutral, T0);
    assert_eq!(h.counters(n).unwrap().leases, 4);
    assert_eq!(h.counters(n).unwrap().expired_uncalled, 2);
}

#[test]
fn a_moment_keeps_its_milliseconds_within_its_range_and_clamps_beyond() {
    for millis in [
        0,
        1,
        -1,
        T0.0,
        1_798_761_600_123, // 2027-01-01T00:00:00.123Z
        MOMENT_MAX,
        -MOMENT_MAX,
    ] {
        let at = Some(UnixMillis(millis));
        assert_eq!(Moment::pack(at).get(), at, "{millis} ms");
    }
    assert_eq!(Moment::pack(None).get(), None);
    assert_eq!(Moment::pack(None), Moment::NONE);
    // Beyond the 48 bits (only a corrupt stored row): the nearest edge,
    // never "no moment".
    for (millis, edge) in [
        (i64::MAX, MOMENT_MAX),
        (MOMENT_MAX + 1, MOMENT_MAX),
        (i64::MIN, -MOMENT_MAX),
        (-MOMENT_MAX - 1, -MOMENT_MAX),
    ] {
        assert_eq!(
            Moment::pack(Some(UnixMillis(millis))).get(),
            Some(UnixMillis(edge)),
            "{millis} ms"
        );
    }
}

#[test]
fn the_run_and_the_invite_flag_share_a_word_without_touching_each_other() {
    let mut n = Number::default();
    n.set_invited(true);
    n.set_uncalled_in_a_row(5);
    assert_eq!((n.invited(), n.uncalled_in_a_row()), (true, 5));
    n.set_invited(false);
    assert_eq!((n.invited(), n.uncalled_in_a_row()), (false, 5));
    n.set_uncalled_in_a_row(u32::MAX);
    assert_eq!(n.uncalled_in_a_row(), RUN_MAX, "a run saturates");
    assert!(!n.invited(), "a saturated run does not set the flag");
    n.set_invited(true);
    n.set_uncalled_in_a_row(0);
    assert_eq!((n.invited(), n.uncalled_in_a_row()), (true, 0));
    // Restored counters beyond the run's range come back saturated.
    let mut h = NumberHealth::new();
    let restored = Counters {
        uncalled_in_a_row: u32::MAX,
        ..Counters::default()
    };
    h.restore("+74951234567", restored);
    let back = h.counters("+74951234567").unwrap();
    assert_eq!(back.uncalled_in_a_row, RUN_MAX);
}

#[test]
fn counters_come_back_as_they_were_restored() {
    let mut h = NumberHealth::new();
    let restored = Counters {
        leases: 7,
        completed: 3,
        expired_uncalled: 4,
        stray_calls: 1,
        last_completion: Some(T0),
        uncalled_in_a_row: 2,
        quarantined_since: None,
    };
    h.restore("+74951234567", restored.clone());
    assert_eq!(h.counters("+74951234567"), Some(restored));
    let huge = Counters {
        leases: u64::MAX,
        last_completion: None,
        quarantined_since: Some(UnixMillis(0)),
        ..Counters::default()
    };
    h.restore("+74951234568", huge);
    let back = h.counters("+74951234568").unwrap();
    assert_eq!(back.leases, u64::from(u32::MAX), "a count saturates");
    assert_eq!(back.quarantined_since, Some(UnixMillis(0)));
    // Not a number the service leases: nothing is kept for it.
    h.on_lease("sip:someone", D, T0);
    assert_eq!(h.counters("sip:someone"), None);
    assert_eq!(h.iter().count(), 2);
    // A number's first lease: counted, with no moments yet.
    h.on_lease("+74950000009", D, T0);
    let fresh = h.counters("+74950000009").unwrap();
    assert_eq!(
        (fresh.leases, fresh.last_completion, fresh.quarantined_since),
        (1, None, None)
    );
    assert_eq!(h.quarantined().count(), 1, "only the restored one");
}

#[test]
fn the_window_keeps_counts_per_slice_for_one_hour() {
    let mut h = NumberHealth::new();
    // A lease issued and one ended every 100 ms for two hours, the second
    // completed: 72,000 of each, in 721 slices at most.
    let mut now = T0;
    for i in 0..72_000 {
        h.on_lease("+74950000001", D, now);
        let ending = if i % 2 == 1 {
            Ending::Completed
        } else {
            Ending::Expired
        };
        h.on_end("+74950000001", D, ending, now);
        now = UnixMillis(now.0 + 100);
    }
    let window = &h.pools[&D];
    let slices_per_hour = (WINDOW_MS / WINDOW_SLICE_MS) as usize;
    assert!(
        window.slices.len() <= slices_per_hour + 1,
        "{}",
        window.slices.len()
    );
    // The last hour plus at most one slice: 36,000 to 36,100 leases.
    let t = h.threshold(D, now);
    let issued = t.leases_per_day * WINDOW_MS as f64 / DAY_MS;
    assert!((36_000.0..=36_100.0).contains(&issued), "{issued}");
    assert!((t.p - 0.5).abs() < 0.001, "{}", t.p);
    // An hour and a slice of nothing: the window is empty again.
    let later = UnixMillis(now.0 + WINDOW_MS + WINDOW_SLICE_MS);
    let t = h.threshold(D, later);
    assert_eq!((t.leases_per_day, t.p, t.k), (0.0, 0.0, None));
    assert!(h.pools[&D].slices.is_empty());
}

/// A day of `numbers` healthy numbers at completion share `p`, leased in
/// rotation at `per_day` leases a day, each lease ending after a minute.
/// Returns how many were quarantined.
fn simulate_a_day(numbers: usize, p: f64, per_day: usize, seed: u64) -> usize {
    let mut h = NumberHealth::new();
    let names: Vec<String> = (0..numbers).map(|i| format!("+7495{i:07}")).collect();
    let mut rng = SplitMix64::new(seed);
    let gap = 86_400_000 / per_day as i64;
    let mut ending: VecDeque<(UnixMillis, usize)> = VecDeque::new();
    let mut quarantined = 0;
    for i in 0..per_day {
        let now = UnixMillis(T0.0 + i as i64 * gap);
        while ending.front().is_some_and(|(at, _)| *at <= now) {
            let Some((at, slot)) = ending.pop_front() else {
                break;
            };
            let called = rng.unit() < p;
            let end = if called {
                h.on_invite(&names[slot], true);
                Ending::Completed
            } else {
                Ending::Expired
            };
            quarantined += usize::from(h.on_end(&names[slot], D, end, at).is_some());
        }
        let slot = i % numbers;
        h.on_lease(&names[slot], D, now);
        ending.push_back((UnixMillis(now.0 + LEASE_MS), slot));
    }
    quarantined
}

#[test]
fn ten_thousand_healthy_numbers_over_a_day_none_quarantined() {
    // 200,000 verifications a day over 10,000 numbers: 20 leases each.
    for p in [0.3, 0.6, 0.9] {
        let q = simulate_a_day(10_000, p, 200_000, 24);
        assert_eq!(q, 0, "p = {p}: healthy numbers quarantined");
    }
}

#[test]
fn the_bare_rule_would_quarantine_healthy_numbers() {
    // Why K also divides by the daily leases: with (1-p)^K < 1e-4 alone
    // (K = 11 at p = 0.6), a day of 10,000 numbers at 40 leases each has
    // runs of 11 uncalled leases by chance.
    let k_bare = ((1e-4f64).ln() / 0.4f64.ln()).floor() as u32 + 1;
    assert_eq!(k_bare, 11);
    let mut rng = SplitMix64::new(7);
    let mut numbers_with_a_run = 0;
    for _ in 0..10_000 {
        let mut run = 0;
        let mut hit = false;
        for _ in 0..40 {
            let called = rng.unit() < 0.6;
            run = if called { 0 } else { run + 1 };
            hit |= run >= k_bare;
        }
        numbers_with_a_run += usize::from(hit);
    }
    assert!(
        numbers_with_a_run > 0,
        "the bare rule finds no run; the stricter K would be needless"
    );
}
