//! The hand-off queue's contract: bounded and in order, batches of at most
//! `max`, the end after a close (or the sender's drop) only once the queue
//! is drained, a refusal once every consumer is gone; with several
//! consumers, each item taken exactly once and the end seen by all; and
//! the wake rule (a parked consumer is woken once, not once per push).

use super::{queue, Receiver, Refused, Sender, Taken};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Long enough for any honest run on a loaded machine; reaching it means a
/// consumer stayed parked with work queued (a lost wake-up).
const STUCK: Duration = Duration::from_secs(20);

fn take_now(rx: &Receiver<u32>, max: usize) -> (Taken, Vec<u32>) {
    let mut got = Vec::new();
    let taken = rx.take(max, Some(Instant::now()), |i| got.push(i));
    (taken, got)
}

/// Waits until `n` consumers are parked on the queue.
fn until_parked<T>(tx: &Sender<T>, n: usize) {
    let since = Instant::now();
    while tx.shared.lock().parked < n {
        assert!(since.elapsed() < STUCK, "{n} consumers never parked");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Starts a consumer thread that takes batches of up to `max` until the
/// end and then reports what it took.
fn consumer(rx: Receiver<u32>, max: usize, done: mpsc::Sender<Vec<u32>>) {
    std::thread::spawn(move || {
        let mut got = Vec::new();
        while rx.take(max, None, |i| got.push(i)) == Taken::Some {}
        let _ = done.send(got);
    });
}

/// Every consumer's items, or a failure naming a consumer that never saw
/// the end.
fn collect(done: &mpsc::Receiver<Vec<u32>>, consumers: usize) -> Vec<Vec<u32>> {
    (0..consumers)
        .map(|_| {
            done.recv_timeout(STUCK)
                .expect("a consumer never saw the end: parked with no wake")
        })
        .collect()
}

#[test]
fn bounded_in_order_batched_and_finished_after_close() {
    let (tx, rx) = queue(3);
    assert!(tx.is_empty());
    assert_eq!(tx.try_send(1), Ok(1));
    assert_eq!(tx.try_send(2), Ok(2));
    assert_eq!(tx.try_send(3), Ok(3), "try_send counts the queued items");
    assert_eq!(tx.try_send(4), Err(Refused::Full(4)), "capacity 3");
    assert_eq!(tx.len(), 3);
    assert_eq!(take_now(&rx, 2), (Taken::Some, vec![1, 2]), "at most max");
    tx.close();
    assert_eq!(tx.try_send(5), Err(Refused::Closed(5)));
    assert_eq!(
        take_now(&rx, 8),
        (Taken::Some, vec![3]),
        "queued before close"
    );
    assert_eq!(take_now(&rx, 8), (Taken::Ended, vec![]));
    assert_eq!(rx.recv(), None);
}

#[test]
fn a_parked_consumer_is_woken_and_a_deadline_ends_the_wait() {
    let (tx, rx) = queue(usize::MAX);
    assert_eq!(take_now(&rx, 8), (Taken::TimedOut, vec![]));
    let deadline = Instant::now() + Duration::from_millis(10);
    assert_eq!(rx.take(8, Some(deadline), |_| {}), Taken::TimedOut);
    assert_eq!(tx.shared.lock().parked, 0, "a timed-out consumer unparks");
    let pusher = std::thread::spawn(move || {
        until_parked(&tx, 1);
        tx.try_send(7).unwrap();
        tx
    });
    assert_eq!(rx.recv(), Some(7));
    drop(pusher.join().unwrap());
    assert_eq!(
        rx.take(8, None, |_| {}),
        Taken::Ended,
        "dropping the sender ends the queue"
    );
}

#[test]
fn a_burst_wakes_each_parked_consumer_once_not_once_per_push() {
    let (tx, rx) = queue(usize::MAX);
    // Two consumers parked (as `take` counts them before its wait): the
    // pushes' decisions, without threads racing them.
    let _other = rx.clone();
    tx.shared.lock().parked = 2;
    let mut wakes = Vec::new();
    for i in 0..5 {
        tx.try_send(i).unwrap();
        wakes.push(tx.shared.lock().waking);
    }
    assert_eq!(
        wakes,
        [1, 2, 2, 2, 2],
        "design choice: a push wakes a parked consumer only while some parked \
         consumer has no wake on its way (one wake per idle-to-busy edge each)"
    );
    // One came back (as `take` does after its wait) and parked again.
    {
        let mut state = tx.shared.lock();
        state.waking -= 1;
    }
    tx.try_send(5).unwrap();
    assert_eq!(
        tx.shared.lock().waking,
        2,
        "the one back in the wait is woken"
    );
    tx.shared.lock().parked = 0;
    tx.shared.lock().waking = 0;
    tx.try_send(6).unwrap();
    assert_eq!(tx.shared.lock().waking, 0, "nobody parked: no wake");
}

#[test]
fn a_second_parked_consumer_is_woken_while_the_first_is_busy() {
    let (tx, rx) = queue(8);
    let (held, holding) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release = std::sync::Arc::new(std::sync::Mutex::new(release_rx));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (rx, held, release) = (rx.clone(), held.clone(), release.clone());
            std::thread::spawn(move || {
                while let Some(item) = rx.recv() {
                    // Busy with `item` until the test lets one go.
                    held.send(item).unwrap();
                    let _ = release.lock().unwrap().recv();
                }
            })
        })
        .collect();
    until_parked(&tx, 2);
    tx.try_send(1).unwrap();
    tx.try_send(2).unwrap();
    let mut got: Vec<u32> = (0..2)
        .map(|_| {
            holding
                .recv_timeout(STUCK)
                .expect("one item stayed queued while a consumer was parked: lost wake-up")
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, [1, 2], "each parked consumer took one");
    drop(tx);
    drop(release_tx);
    for worker in workers {
        worker.join().unwrap();
    }
}

#[test]
fn several_consumers_take_each_item_exactly_once() {
    const ITEMS: u32 = 20_000;
    let (tx, rx) = queue(64);
    let (done, results) = mpsc::channel();
    for max in [1, 1, 3, 16] {
        consumer(rx.clone(), max, done.clone());
    }
    drop((rx, done));
    let since = Instant::now();
    for i in 0..ITEMS {
        let mut item = i;
        loop {
            match tx.try_send(item) {
                Ok(_) => break,
                Err(Refused::Full(back)) => {
                    assert!(since.elapsed() < STUCK, "consumers stopped taking");
                    item = back;
                    std::thread::yield_now();
                }
                Err(Refused::Closed(_)) => panic!("consumers gone early"),
            }
        }
    }
    tx.close();
    let per_consumer = collect(&results, 4);
    for got in &per_consumer {
        assert!(got.windows(2).all(|w| w[0] < w[1]), "each in queue order");
    }
    let mut all = per_consumer.concat();
    all.sort_unstable();
    assert_eq!(
        all,
        (0..ITEMS).collect::<Vec<_>>(),
        "each item exactly once"
    );
}

#[test]
fn every_consumer_drains_then_sees_the_end_after_close() {
    let (tx, rx) = queue(8);
    let (done, results) = mpsc::channel();
    for _ in 0..3 {
        consumer(rx.clone(), 1, done.clone());
    }
    until_parked(&tx, 3);
    for i in 0..5 {
        tx.try_send(i).unwrap();
    }
    tx.close();
    assert_eq!(tx.try_send(9), Err(Refused::Closed(9)), "closed");
    let mut all = collect(&results, 3).concat();
    all.sort_unstable();
    assert_eq!(all, [0, 1, 2, 3, 4], "queued before close, then the end");
    assert_eq!(
        rx.recv(),
        None,
        "a consumer that comes late sees the end too"
    );
}

#[test]
fn a_push_is_refused_only_once_every_consumer_is_gone() {
    let (tx, rx) = queue(4);
    let other = rx.clone();
    drop(rx);
    assert_eq!(tx.try_send(1), Ok(1), "one consumer is left");
    assert_eq!(other.recv(), Some(1));
    drop(other);
    assert_eq!(
        tx.try_send(2),
        Err(Refused::Closed(2)),
        "every consumer gone"
    );
    assert!(tx.is_empty(), "nothing queued that nobody will take");
}
