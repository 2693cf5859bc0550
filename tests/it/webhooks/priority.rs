//! The webhook pipeline's threads run below the rest of the service in
//! CPU priority, as the operator sees them in `/proc` (or `top -H`): every
//! `webhook-sender-N` and the `webhook-driver` ten nice steps below the
//! main thread, the storage writer at the main thread's own.
//!
//! Not for: what the priority buys under load (benches/README.md,
//! "Background threads at a lower priority", measured with sipp).

use crate::support::*;
use std::time::Duration;

/// The step the service applies (`BACKGROUND_NICE_STEP` in
/// `src/shared/priority.rs`): a deliberate change of it changes this too.
const STEP: i64 = 10;

/// The nice value in a `/proc/.../stat` text. The name in its parentheses
/// may hold spaces: fields are counted after the last ')'. Nice is field
/// 19, the 17th after it.
fn nice(stat: &str) -> i64 {
    let after = &stat[stat.rfind(')').expect("stat has the name in parentheses") + 2..];
    let nice = after.split(' ').nth(16).and_then(|f| f.parse().ok());
    nice.expect("stat's nice field")
}

/// Every thread of `pid`: its name (as the kernel keeps it, cut to 15
/// bytes: every sender shows as `webhook-sender-`) and its nice value.
fn threads(pid: u32) -> Vec<(String, i64)> {
    let dir = format!("/proc/{pid}/task");
    let mut out = Vec::new();
    for task in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir}: {e}")) {
        let path = task.unwrap().path();
        // A thread that ended between the listing and the read is skipped.
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("stat")),
        ) else {
            continue;
        };
        out.push((comm.trim().to_owned(), nice(&stat)));
    }
    out
}

fn in_pipeline(name: &str) -> bool {
    name == "webhook-driver" || name.starts_with("webhook-sender-")
}

#[test]
fn webhook_threads_run_ten_nice_steps_below_the_service() {
    let s = Server::with_pools(1, 0);
    let pid = s.pid();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the main thread");
    let base = nice(&stat);
    let expected = (base + STEP).min(19);
    // The threads lower themselves as they start, just before READY or
    // just after it: wait (bounded) for the last of them.
    let lowered = poll(Duration::from_secs(10), || {
        let seen = threads(pid);
        let pipeline: Vec<i64> = seen
            .iter()
            .filter(|(name, _)| in_pipeline(name))
            .map(|(_, nice)| *nice)
            .collect();
        (pipeline.len() > 1 && pipeline.iter().all(|n| *n == expected)).then_some(seen)
    });
    let seen = lowered.unwrap_or_else(|| threads(pid));
    let nice_of = |wanted: &str| {
        seen.iter()
            .filter(|(name, _)| name == wanted || name.starts_with(&format!("{wanted}-")))
            .map(|(_, nice)| *nice)
            .collect::<Vec<_>>()
    };
    let (driver, senders) = (nice_of("webhook-driver"), nice_of("webhook-sender"));
    assert_eq!(
        driver,
        vec![expected],
        "design choice: the webhook driver runs {STEP} nice steps below the service \
         (main thread at {base}); threads: {seen:?}"
    );
    assert!(
        !senders.is_empty() && senders.iter().all(|n| *n == expected),
        "design choice: every webhook sender runs {STEP} nice steps below the service \
         (main thread at {base}); threads: {seen:?}"
    );
    assert_eq!(
        nice_of("db-writer"),
        vec![base],
        "the storage writer answers calls: it keeps the service's priority; threads: {seen:?}"
    );
}
