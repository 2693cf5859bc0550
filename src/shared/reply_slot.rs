//! A one-shot answer from another thread to one waiting coroutine (or
//! thread), with a deadline that costs nothing when the answer comes first.
//!
//! Why not a may channel with `recv_timeout`: that arms a timer on may's
//! global timer thread for every wait, and when the answer comes first,
//! removing the timer wakes that thread (a futex wake and two context
//! switches per wait, whatever the deadline). Every create waited that way
//! for its commit, and a profile of 50 connections creating put about 7 %
//! of the server's CPU in arming, removing and servicing those timers, and
//! almost 4 % more in building the channel. Here a wait is one allocation
//! (the slot, with its parker inside), parks without a timer, and is listed
//! with its deadline in [`Deadlines`]; one thread, started on first use,
//! looks at the list every [`TICK`] and ends the waits whose deadline has
//! passed. So a deadline is kept to within one tick late, which the waits
//! that use it (seconds: a stalled disk, a writer that does not answer)
//! do not notice.
//!
//! Not for: waits shorter than a few ticks, or waking on anything but the
//! one answer (polling loops sleep instead, as `wait_until_applied` does).

use may::sync::Blocker;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How often the deadline thread looks for waits past their deadline: the
/// most a deadline is overrun by.
pub const TICK: Duration = Duration::from_millis(50);

/// What a slot holds.
enum State<T> {
    /// No answer yet: the waiter is (or is about to be) parked.
    Waiting,
    Answered(T),
    /// Over without an answer, for the reason given (an answer that comes
    /// later is handed back to its giver), or over with its answer taken.
    Over(Ended),
}

/// Why a wait ended without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Its deadline passed first.
    TimedOut,
    /// The answering half was dropped unsent (as a channel's disconnection).
    Dropped,
}

/// One wait's answer and the parker of whoever waits for it.
struct Slot<T> {
    state: Mutex<State<T>>,
    blocker: Blocker,
}

/// Ends a wait whose deadline passed, if it has no answer yet.
trait Expire: Send + Sync {
    fn expire(&self);
}

impl<T: Send> Expire for Slot<T> {
    fn expire(&self) {
        let mut state = self.state.lock();
        if matches!(*state, State::Waiting) {
            *state = State::Over(Ended::TimedOut);
            drop(state);
            self.blocker.unpark();
        }
    }
}

/// The sending half: called once by whoever answers, from any thread.
pub struct Answer<T>(Arc<Slot<T>>);

impl<T: Send> Answer<T> {
    /// Hands `value` to the waiter. Returns it back if the waiter's deadline
    /// passed first (the waiter is gone), so the caller decides where it is
    /// dropped.
    pub fn send(self, value: T) -> Result<(), T> {
        let mut state = self.0.state.lock();
        match *state {
            State::Waiting => {
                *state = State::Answered(value);
                drop(state);
                self.0.blocker.unpark();
                Ok(())
            }
            State::Answered(_) | State::Over(_) => Err(value),
        }
    }
}

/// The waiting half.
pub struct Wait<T>(Arc<Slot<T>>);

/// A new wait, created on the thread (or in the coroutine) that will wait.
pub fn slot<T: Send + 'static>() -> (Answer<T>, Wait<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Waiting),
        blocker: Blocker::new(false),
    });
    (Answer(slot.clone()), Wait(slot))
}

impl<T: Send + 'static> Wait<T> {
    /// The answer, or why there is none: none came within `timeout` (kept
    /// to within one [`TICK`] late), or the [`Answer`] was dropped unsent.
    pub fn wait(self, timeout: Duration) -> Result<T, Ended> {
        if let Some(done) = self.take() {
            return done;
        }
        let deadlines = Deadlines::global();
        let entry = deadlines.add(Instant::now() + timeout, self.0.clone());
        let answer = loop {
            if let Some(done) = self.take() {
                break done;
            }
            // Without a timer: the answer or the deadline thread unparks
            // it. A park that returns early (cancellation) looks again.
            let _ = self.0.blocker.park(None);
        };
        deadlines.remove(entry);
        answer
    }

    /// `Some(outcome)` once the wait is over, `None` while it is not.
    fn take(&self) -> Option<Result<T, Ended>> {
        let mut state = self.0.state.lock();
        // Whatever it held, a slot that was over stays over for the same
        // reason; one whose answer is taken here reads as timed out to an
        // answer that (wrongly) comes twice.
        match std::mem::replace(&mut *state, State::Over(Ended::TimedOut)) {
            State::Answered(v) => Some(Ok(v)),
            State::Over(ended) => {
                *state = State::Over(ended);
                Some(Err(ended))
            }
            State::Waiting => {
                *state = State::Waiting;
                None
            }
        }
    }
}

impl<T> Drop for Answer<T> {
    /// An answer dropped unsent ends the wait at once (as a channel's
    /// disconnection did), not at its deadline.
    fn drop(&mut self) {
        let mut state = self.0.state.lock();
        if matches!(*state, State::Waiting) {
            *state = State::Over(Ended::Dropped);
            drop(state);
            self.0.blocker.unpark();
        }
    }
}

/// The waits in progress, each with its deadline, and the thread that ends
/// them when it passes.
struct Deadlines {
    waits: Mutex<Waits>,
}

#[derive(Default)]
struct Waits {
    next: u64,
    by_id: HashMap<u64, (Instant, Arc<dyn Expire>)>,
}

impl Deadlines {
    /// The process's one list, with its thread started on first use.
    fn global() -> &'static Deadlines {
        static GLOBAL: OnceLock<&'static Deadlines> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let deadlines: &'static Deadlines = Box::leak(Box::new(Deadlines {
                waits: Mutex::new(Waits::default()),
            }));
            std::thread::Builder::new()
                .name("wait-deadlines".into())
                .spawn(move || loop {
                    std::thread::sleep(TICK);
                    deadlines.expire_due(Instant::now());
                })
                // Without this thread no wait would ever time out; a
                // process that cannot start one thread cannot serve.
                .expect("start the wait deadline thread");
            deadlines
        })
    }

    fn add(&self, deadline: Instant, wait: Arc<dyn Expire>) -> u64 {
        let mut waits = self.waits.lock();
        let id = waits.next;
        waits.next += 1;
        waits.by_id.insert(id, (deadline, wait));
        id
    }

    fn remove(&self, id: u64) {
        self.waits.lock().by_id.remove(&id);
    }

    /// Ends every listed wait whose deadline is at or before `now`. The
    /// waits are unparked outside the list's lock.
    fn expire_due(&self, now: Instant) {
        let due: Vec<Arc<dyn Expire>> = {
            let waits = self.waits.lock();
            waits
                .by_id
                .values()
                .filter(|(deadline, _)| *deadline <= now)
                .map(|(_, wait)| wait.clone())
                .collect()
        };
        for wait in due {
            wait.expire();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_sent_before_the_wait_is_taken_at_once() {
        let (answer, wait) = slot();
        answer.send(7).expect("the waiter is there");
        assert_eq!(wait.wait(Duration::from_secs(30)), Ok(7));
    }

    #[test]
    fn an_answer_from_another_thread_wakes_the_waiter() {
        let (answer, wait) = slot();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            answer.send("done").expect("the waiter is there");
        });
        assert_eq!(wait.wait(Duration::from_secs(30)), Ok("done"));
        sender.join().expect("sender");
    }

    #[test]
    fn a_dropped_answer_ends_the_wait_before_its_deadline() {
        let (answer, wait) = slot::<u8>();
        let started = Instant::now();
        let dropper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(answer);
        });
        assert_eq!(wait.wait(Duration::from_secs(30)), Err(Ended::Dropped));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "ended by the drop"
        );
        dropper.join().expect("dropper");
    }

    #[test]
    fn a_wait_without_an_answer_ends_at_its_deadline_and_a_late_answer_comes_back() {
        let (answer, wait) = slot::<String>();
        let started = Instant::now();
        assert_eq!(wait.wait(Duration::from_millis(100)), Err(Ended::TimedOut));
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "not before the deadline"
        );
        // The waiter is gone: the late answer is handed back to be dropped
        // by whoever gave it.
        assert_eq!(answer.send("late".into()), Err("late".to_string()));
    }

    #[test]
    fn a_coroutine_is_woken_by_an_answer_from_a_thread() {
        let (answer, wait) = slot();
        let waiter = may::go!(move || wait.wait(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        answer.send(42u32).expect("the waiter is there");
        assert_eq!(waiter.join().expect("coroutine"), Ok(42));
    }

    #[test]
    fn finished_waits_leave_the_deadline_list() {
        for i in 0..100u32 {
            let (answer, wait) = slot();
            let sender = std::thread::spawn(move || answer.send(i));
            assert_eq!(wait.wait(Duration::from_secs(30)), Ok(i));
            sender.join().expect("sender").expect("sent");
        }
        // Other tests of this binary may be waiting right now; none of
        // these hundred is still listed.
        assert!(Deadlines::global().waits.lock().by_id.len() < 100);
    }
}
