//! may's event sources write into a coroutine's handle after handing the
//! coroutine to another thread, which can finish it meanwhile
//! (`src/coroutine.rs` keeps finished coroutines' handles for that). Here,
//! under valgrind, thousands of short coroutines spawned through
//! `dialproof::coroutine::spawn` sleep 200 us and end while busy threads
//! take the cores from may's workers: no read or write may touch freed
//! memory. With handles dropped as the coroutines end (may's own
//! behaviour), valgrind reported `Invalid read` in `Sleep::subscribe` in
//! every run of this test.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the churn runs (under valgrind, which slows it about 50-fold).
const CHURN: Duration = Duration::from_secs(25);
/// Coroutines alive at most at once.
const LIVE_MAX: u64 = 500;
/// Threads that only spin, so that may's workers get descheduled.
const SPINNERS: usize = 4;

#[test]
fn coroutines_that_sleep_and_end_touch_no_freed_memory() {
    let exe = std::env::current_exe().expect("the test binary's path");
    let run = Command::new("valgrind")
        .arg("--quiet")
        .arg(&exe)
        .args([
            "--exact",
            "resilience::coroutines::churn_of_short_sleeping_coroutines",
            "--ignored",
            "--nocapture",
        ])
        .output()
        .expect("valgrind runs (tools/test.sh installs it)");
    let stderr = String::from_utf8_lossy(&run.stderr);
    // Only accesses to freed blocks count: valgrind also reports reads of
    // the coroutines' own stacks as it follows may's stack switches ("in a
    // rw- anonymous segment"), which are not errors of the program.
    let freed: Vec<&str> = stderr.lines().filter(|l| l.contains("free'd")).collect();
    assert!(
        run.status.success() && freed.is_empty(),
        "valgrind: {:?}, {} accesses to freed memory\n{stderr}",
        run.status,
        freed.len()
    );
    assert!(
        stderr.contains("churn ended"),
        "the churn did not run to its end:\n{stderr}"
    );
}

#[test]
#[ignore = "run under valgrind by coroutines_that_sleep_and_end_touch_no_freed_memory"]
fn churn_of_short_sleeping_coroutines() {
    may::config().set_workers(2);
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = (0..SPINNERS)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let end = Instant::now() + CHURN;
    let mut spawned = 0u64;
    while Instant::now() < end {
        if spawned - done.load(Ordering::Relaxed) >= LIVE_MAX {
            std::thread::sleep(Duration::from_micros(100));
            continue;
        }
        spawned += 1;
        let (done, sleeps) = (done.clone(), 1 + spawned % 3);
        dialproof::coroutine::spawn(move || {
            for _ in 0..sleeps {
                may::coroutine::sleep(Duration::from_micros(200));
            }
            done.fetch_add(1, Ordering::Relaxed);
        });
    }
    stop.store(true, Ordering::Relaxed);
    for s in spinners {
        s.join().expect("a spinner");
    }
    let waited = Instant::now();
    while done.load(Ordering::Relaxed) < spawned && waited.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        done.load(Ordering::Relaxed),
        spawned,
        "every coroutine ended"
    );
    eprintln!("churn ended: {spawned} coroutines");
}
