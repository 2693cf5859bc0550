//! `serve --ha-child`: the service as `dialproof ha` runs it. The
//! supervisor speaks on the child's stdin, one word a line:
//!
//! - `lease <ms>`: the supervisor holds the primary's lease for at least
//!   `ms` more milliseconds (its fence deadline, counted from the send of
//!   its last successful renewal, minus now);
//! - `fence`: stop acting as the primary now.
//!
//! The child fences itself (`crate::shared::fence`) on `fence`, when the
//! last `lease` runs out without a new one (a frozen or cut-off
//! supervisor), and when stdin closes (the supervisor died). All three
//! take effect in-process at once; nothing else is needed from outside.
//!
//! Not for: deciding when to fence (`dialproof_engine::ha`, in the
//! supervisor) or what a fence refuses (the API, SIP and `/readyz`).

use crate::shared::clock::Clock;
use crate::shared::fence::Fence;
use anyhow::Result;
use std::io::BufRead;
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One line of the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    Lease(Duration),
    Fence,
}

/// Parses one line; `None` for anything else (logged and ignored).
pub fn parse_word(line: &str) -> Option<Word> {
    let line = line.trim();
    if line == "fence" {
        return Some(Word::Fence);
    }
    let ms: u64 = line.strip_prefix("lease ")?.trim().parse().ok()?;
    Some(Word::Lease(Duration::from_millis(ms)))
}

/// Starts the stdin reader and the watchdog that sets `fence`.
pub fn spawn(fence: Arc<Fence>, clock: Clock) -> Result<()> {
    let (tx, rx) = channel();
    std::thread::Builder::new()
        .name("ha-stdin".into())
        .spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                match parse_word(&line) {
                    Some(word) => {
                        if tx.send(word).is_err() {
                            return;
                        }
                    }
                    None => tracing::warn!(line = %line, "ha: not a supervisor's word; ignored"),
                }
            }
            // Dropping `tx` tells the watchdog that stdin closed.
        })?;
    std::thread::Builder::new()
        .name("ha-fence".into())
        .spawn(move || {
            let why = watch(&rx);
            if fence.fence(clock.now()) {
                tracing::warn!(why, "fenced: creates, cancels and calls answer 503, /readyz fails, lines un-register");
            }
        })?;
    Ok(())
}

/// Waits for the reason to fence.
fn watch(rx: &std::sync::mpsc::Receiver<Word>) -> &'static str {
    let mut deadline: Option<Instant> = None;
    loop {
        let wait = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        match rx.recv_timeout(wait) {
            Ok(Word::Lease(valid)) => deadline = Some(Instant::now() + valid),
            Ok(Word::Fence) => return "the supervisor fenced this node",
            Err(RecvTimeoutError::Timeout) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return "the lease ran out with no word from the supervisor";
                }
            }
            Err(RecvTimeoutError::Disconnected) => return "the supervisor is gone (stdin closed)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisors_words() {
        assert_eq!(parse_word("fence\n"), Some(Word::Fence));
        assert_eq!(
            parse_word("lease 3999"),
            Some(Word::Lease(Duration::from_millis(3999)))
        );
        assert_eq!(parse_word("lease -1"), None);
        assert_eq!(parse_word("lease"), None);
        assert_eq!(parse_word("fenced"), None);
    }

    #[test]
    fn the_watchdog_fences_on_the_word_the_deadline_and_a_closed_pipe() {
        let (tx, rx) = channel();
        tx.send(Word::Fence).unwrap();
        assert_eq!(watch(&rx), "the supervisor fenced this node");
        let (tx, rx) = channel();
        tx.send(Word::Lease(Duration::from_millis(30))).unwrap();
        let started = Instant::now();
        assert_eq!(
            watch(&rx),
            "the lease ran out with no word from the supervisor"
        );
        assert!(started.elapsed() >= Duration::from_millis(30));
        drop(tx);
        let (tx, rx) = channel::<Word>();
        drop(tx);
        assert_eq!(watch(&rx), "the supervisor is gone (stdin closed)");
    }
}
