//! Named fail points for the reliability harness.
//!
//! A spec such as `writer.before_commit=error,writer.after_commit=3*abort`
//! arms points by name. `error` makes the operation at that point return
//! `StorageError::Injected(name)`; `abort` calls `std::process::abort()` to
//! simulate a crash at exactly that moment; `delay(MS)` holds the thread at
//! that point for MS milliseconds (at most [`DELAY_MS_MAX`]) and goes on, as a
//! slow disk would (every point is on a storage thread, never a coroutine).
//! A `N*` prefix fires the point the next N times, then disarms it. With no
//! spec every check is one branch on a `None`, so production builds keep the
//! checks.
//!
//! Not for: random fault injection; the harness decides when to arm points
//! by restarting the process with another spec.

use crate::error::StorageError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Every fail point the store checks, by the name a spec uses.
///
/// - `writer.begin`: instead of `BEGIN IMMEDIATE` (as when another process
///   holds the write lock past the busy timeout): every reply of the batch
///   gets the error.
/// - `writer.op`: before each write operation of a batch (that op alone fails;
///   the rest of the batch commits).
/// - `writer.before_commit`: after every op of a batch ran, before COMMIT
///   (the batch is rolled back; every reply gets the error).
/// - `writer.after_commit`: after COMMIT, before any reply is called (with
///   `error` the replies report failure although the rows are stored, as when
///   an acknowledgement is lost).
/// - `reader.query`: before a read job runs on a reader thread.
pub const FAIL_POINT_NAMES: [&str; POINT_COUNT] = [
    "writer.begin",
    "writer.op",
    "writer.before_commit",
    "writer.after_commit",
    "reader.query",
];

const POINT_COUNT: usize = 5;
/// The longest `delay(MS)` a spec may ask for.
pub const DELAY_MS_MAX: u64 = 60_000;

/// A place in the code that checks for an armed fail point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    WriterBegin = 0,
    WriterOp = 1,
    WriterBeforeCommit = 2,
    WriterAfterCommit = 3,
    ReaderQuery = 4,
}

impl Point {
    fn name(self) -> &'static str {
        FAIL_POINT_NAMES[self as usize]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Error,
    Abort,
    Delay(std::time::Duration),
}

/// `error`, `abort` or `delay(MS)`.
fn parse_action(name: &str, text: &str) -> Result<Action, String> {
    match text {
        "error" => return Ok(Action::Error),
        "abort" => return Ok(Action::Abort),
        _ => {}
    }
    let ms = text
        .strip_prefix("delay(")
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| {
            format!("fail point '{name}': unknown action '{text}' (use error, abort or delay(MS))")
        })?;
    match ms.trim().parse::<u64>() {
        Ok(ms) if ms <= DELAY_MS_MAX => Ok(Action::Delay(std::time::Duration::from_millis(ms))),
        _ => Err(format!(
            "fail point '{name}': delay must be 0..={DELAY_MS_MAX} milliseconds, got '{ms}'"
        )),
    }
}

#[derive(Debug)]
struct Armed {
    action: Action,
    /// How many more times the point fires; `None` fires forever.
    remaining: Option<AtomicU64>,
}

/// A set of armed fail points. Clones share the remaining counts.
#[derive(Clone, Debug, Default)]
pub struct FailPoints {
    armed: Option<Arc<[Option<Armed>; POINT_COUNT]>>,
}

impl FailPoints {
    /// Parses `name=[N*]action[,name=...]`. An empty spec arms nothing.
    /// Unknown names, unknown actions, a zero count and a name given twice
    /// are errors, so a typo in a harness never silently tests nothing.
    pub fn from_spec(spec: &str) -> Result<Self, String> {
        let mut points: [Option<Armed>; POINT_COUNT] = [None, None, None, None, None];
        let mut any = false;
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, action_text) = item
                .split_once('=')
                .ok_or_else(|| format!("fail point '{item}' has no '=action'"))?;
            let name = name.trim();
            let index = FAIL_POINT_NAMES
                .iter()
                .position(|n| *n == name)
                .ok_or_else(|| {
                    format!(
                        "unknown fail point '{name}' (known: {})",
                        FAIL_POINT_NAMES.join(", ")
                    )
                })?;
            let (count, action_name) = match action_text.trim().split_once('*') {
                Some((n, a)) => {
                    let n: u64 = n
                        .trim()
                        .parse()
                        .map_err(|_| format!("fail point '{name}': bad count '{n}'"))?;
                    if n == 0 {
                        return Err(format!("fail point '{name}': count must be at least 1"));
                    }
                    (Some(n), a.trim())
                }
                None => (None, action_text.trim()),
            };
            let action = parse_action(name, action_name)?;
            let slot = &mut points[index];
            if slot.is_some() {
                return Err(format!("fail point '{name}' is given twice"));
            }
            *slot = Some(Armed {
                action,
                remaining: count.map(AtomicU64::new),
            });
            any = true;
        }
        Ok(FailPoints {
            armed: any.then(|| Arc::new(points)),
        })
    }

    /// Whether no point is armed.
    pub fn is_empty(&self) -> bool {
        self.armed.is_none()
    }

    /// Fires `point` if it is armed: returns the injected error, aborts, or
    /// waits.
    #[inline]
    pub(crate) fn check(&self, point: Point) -> Result<(), StorageError> {
        match &self.armed {
            None => Ok(()),
            Some(armed) => fire(armed[point as usize].as_ref(), point),
        }
    }
}

#[cold]
fn fire(armed: Option<&Armed>, point: Point) -> Result<(), StorageError> {
    let Some(armed) = armed else {
        return Ok(());
    };
    if let Some(remaining) = &armed.remaining {
        // Take one firing if any is left; once at zero the point stays quiet.
        let took = remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !took {
            return Ok(());
        }
    }
    match armed.action {
        Action::Error => Err(StorageError::Injected(point.name())),
        Action::Abort => {
            tracing::error!(fail_point = point.name(), "fail point abort");
            std::process::abort()
        }
        Action::Delay(d) => {
            std::thread::sleep(d);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_actions_and_counts() {
        let fp = FailPoints::from_spec(
            " writer.before_commit=error, writer.after_commit=abort,reader.query=2*error",
        )
        .unwrap();
        assert!(!fp.is_empty());
        assert_eq!(
            fp.check(Point::WriterBeforeCommit),
            Err(StorageError::Injected("writer.before_commit"))
        );
        assert_eq!(fp.check(Point::WriterOp), Ok(()));
        for _ in 0..2 {
            assert_eq!(
                fp.check(Point::ReaderQuery),
                Err(StorageError::Injected("reader.query"))
            );
        }
        assert_eq!(fp.check(Point::ReaderQuery), Ok(()));
    }

    #[test]
    fn delay_waits_and_goes_on() {
        let fp = FailPoints::from_spec("writer.op=1*delay(30)").unwrap();
        let start = std::time::Instant::now();
        assert_eq!(fp.check(Point::WriterOp), Ok(()));
        assert!(start.elapsed() >= std::time::Duration::from_millis(30));
        assert_eq!(fp.check(Point::WriterOp), Ok(()));
    }

    #[test]
    fn empty_spec_arms_nothing() {
        let fp = FailPoints::from_spec("").unwrap();
        assert!(fp.is_empty());
        assert_eq!(fp.check(Point::WriterOp), Ok(()));
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in [
            "writer.op",
            "nope=error",
            "writer.op=explode",
            "writer.op=x*error",
            "writer.op=0*error",
            "writer.op=error,writer.op=abort",
            "writer.op=delay(x)",
            "writer.op=delay(60001)",
            "writer.op=delay(5",
        ] {
            assert!(FailPoints::from_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn clones_share_counts() {
        let a = FailPoints::from_spec("writer.op=1*error").unwrap();
        let b = a.clone();
        assert!(a.check(Point::WriterOp).is_err());
        assert!(b.check(Point::WriterOp).is_ok());
    }
}
