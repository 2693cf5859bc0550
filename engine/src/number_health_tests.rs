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
    let before = changes(&mut h)[&dead];
    assert_eq!(before.uncalled_in_a_row, before.expired_uncalled);
    assert!(h.release(&dead));
    assert_eq!(h.quarantined().count(), 0);
    // The release is a change: the run, now zero, is to be stored.
    assert_eq!(changes(&mut h)[&dead], Change::default());
    assert!(!h.release(&dead), "releasing twice is a no-op");
}

/// The changes taken now, by number's text.
fn changes(h: &mut NumberHealth) -> HashMap<String, Change> {
    h.take_changes()
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect()
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
    let c = changes(&mut h)[n];
    assert_eq!(
        (c.leases, c.expired_uncalled, c.uncalled_in_a_row),
        (2, 1, 0)
    );
    h.on_lease(n, D, T0);
    h.on_end(n, D, Ending::Expired, T0);
    assert_eq!(changes(&mut h)[n].uncalled_in_a_row, 1);
    h.on_invite(n, false);
    let c = changes(&mut h)[n];
    assert_eq!((c.stray_calls, c.uncalled_in_a_row), (1, 0));
    // Cancels and line failures tell nothing.
    h.on_lease(n, D, T0);
    h.on_end(n, D, Ending::Neutral, T0);
    let c = changes(&mut h)[n];
    assert_eq!((c.leases, c.expired_uncalled), (1, 0));
}

#[test]
fn the_run_and_the_two_flags_share_a_word_without_touching_each_other() {
    let mut n = Number::default();
    n.set_flag(INVITED, true);
    n.set_uncalled_in_a_row(5);
    n.set_flag(QUARANTINED, true);
    let read = |n: Number| (n.flag(INVITED), n.flag(QUARANTINED), n.uncalled_in_a_row());
    assert_eq!(read(n), (true, true, 5));
    n.set_flag(INVITED, false);
    assert_eq!(read(n), (false, true, 5));
    n.set_uncalled_in_a_row(u32::MAX);
    assert_eq!(read(n), (false, true, RUN_MAX), "a run saturates");
    n.set_flag(QUARANTINED, false);
    n.set_flag(INVITED, true);
    n.set_uncalled_in_a_row(0);
    assert_eq!(read(n), (true, false, 0));
    // A stored run beyond the word's range comes back saturated.
    let big = PackedNumber::parse("+74951234567").expect("a number");
    let mut h = NumberHealth::restored([(big, u32::MAX, false)]);
    h.on_lease("+74951234567", D, T0);
    assert_eq!(changes(&mut h)["+74951234567"].uncalled_in_a_row, RUN_MAX);
}

#[test]
fn the_restored_state_is_no_change_and_counts_not_stored_come_back() {
    let packed = |text: &str| PackedNumber::parse(text).expect("a number");
    let (a, b) = ("+74951234567", "+74951234568");
    let mut h = NumberHealth::restored([(packed(a), 2, false), (packed(b), 0, true)]);
    assert!(h.take_changes().is_empty(), "restoring changes nothing");
    let quarantined: Vec<String> = h.quarantined().map(|n| n.to_string()).collect();
    assert_eq!(quarantined, vec![b.to_owned()]);
    // The restored run goes on.
    h.on_lease(a, D, T0);
    h.on_end(a, D, Ending::Expired, T0);
    let taken = h.take_changes();
    assert_eq!(
        taken,
        vec![(
            packed(a),
            Change {
                leases: 1,
                expired_uncalled: 1,
                uncalled_in_a_row: 3,
                ..Change::default()
            }
        )]
    );
    // Not stored: given back, then added to what came since; the later
    // completion stays.
    let later = UnixMillis(T0.0 + 5_000);
    h.on_lease(a, D, later);
    h.on_invite(a, true);
    h.on_end(a, D, Ending::Completed, later);
    h.put_back(taken);
    let c = changes(&mut h)[a];
    assert_eq!((c.leases, c.completed, c.expired_uncalled), (2, 1, 1));
    assert_eq!((c.last_completion, c.uncalled_in_a_row), (Some(later), 0));
    // Taken and stored: nothing more to take.
    assert!(h.take_changes().is_empty());
    // Not a number the service leases: nothing is kept for it.
    h.on_lease("sip:someone", D, T0);
    h.on_invite("sip:someone", false);
    assert!(h.take_changes().is_empty());
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
