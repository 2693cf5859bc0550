//! Point reads on the calling thread: each thread that asks keeps its own
//! `query_only` connection per store, opened on first use.
//!
//! Why: a GET of one verification by its id is a primary-key lookup of a
//! few microseconds on pages the cache holds, while handing it to a reader
//! thread and waking the waiting coroutine again costs two thread switches
//! and a queue: more than the read. The service's worker threads therefore
//! run these reads themselves ([`crate::Store::read_here`]). A thread keeps
//! at most [`STORES_PER_THREAD_MAX`] connections (a process runs one store;
//! tests open many), dropping the oldest. These connections keep a larger
//! page cache than the reader threads' ([`PAGE_CACHE_KIB`]).
//!
//! Not for: scans, lists or anything that may take long (those stay on the
//! reader threads, so a worker never stalls its other coroutines on them),
//! or writes (the connection refuses them).

use crate::conn::{self, Role};
use crate::error::Result;
use crate::failpoints::{FailPoints, Point};
use crate::reader::Reader;
use std::cell::RefCell;
use std::path::Path;

/// Page cache of each of these connections (SQLite's default is 2 MiB).
/// A GET by id reads the id index and the row's table page. With the
/// default, most GETs over a working set of 150,000 went to the kernel
/// for pages (`tools/read-ab.sh`: server CPU per GET fell from about 52
/// to 26 us with a 32 MiB cache, when every poll of an older
/// verification read SQLite). Since the service keeps a copy of a pending
/// verification a GET read (the held rows' copies), SQLite is read about
/// once per verification, and 8 MiB (which holds the b-trees' interior
/// pages) costs no CPU per read that `tools/read-ab.sh` over 450,000 or
/// the `get_path` bench could tell from 32 MiB, with 33 MB less resident
/// in a process that served 300,000 (`tools/serving-memory.sh`). It
/// fills only as GETs read pages, and only on the threads that serve
/// GETs; recovery and the other reads use the reader threads, which keep
/// the default, so a restart's memory does not grow with it.
pub const PAGE_CACHE_KIB: u32 = 8 * 1024;

/// Connections one thread keeps, one per store it read from most recently.
pub const STORES_PER_THREAD_MAX: usize = 4;

thread_local! {
    /// (store id, its connection on this thread), most recent last.
    static READERS: RefCell<Vec<(u64, Reader)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `job` with this thread's reader of store `store_id` (the database
/// at `path`), opening it first if this thread has none. The reader fail
/// point applies as it does on the reader threads. A job that panics loses
/// only its own answer (the panic goes on up to the caller).
pub(crate) fn with_reader<T>(
    store_id: u64,
    path: &Path,
    failpoints: &FailPoints,
    job: impl FnOnce(&Reader) -> Result<T>,
) -> Result<T> {
    failpoints.check(Point::ReaderQuery)?;
    READERS.with(|cell| {
        // The only borrow of this thread's list: `job` cannot reach it.
        let mut readers = cell.borrow_mut();
        let at = match readers.iter().position(|(id, _)| *id == store_id) {
            Some(at) => at,
            None => {
                let conn = conn::open(path, Role::Reader)?;
                // Negative: a size in KiB, not in pages.
                conn.pragma_update(None, "cache_size", -(PAGE_CACHE_KIB as i64))?;
                let reader = Reader::from_connection(conn);
                if readers.len() >= STORES_PER_THREAD_MAX {
                    readers.remove(0);
                }
                readers.push((store_id, reader));
                readers.len() - 1
            }
        };
        job(&readers[at].1)
    })
}

/// A store's identity for [`with_reader`]: unique within the process, so a
/// store opened where a dropped one was never finds the old connection.
pub(crate) fn next_store_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
