//! The service's handle on the database: one writer thread, N reader
//! threads, bounded queues to both, and an orderly shutdown.
//!
//! `Store` is a cheap `Clone` (an `Arc`). Its methods never block on SQLite:
//! `submit` and `read` only enqueue (or fail at once with `QueueFull` /
//! `Closed`), so they are safe to call from a may coroutine. Results arrive
//! through the reply callbacks, on the storage threads.
//!
//! Not for: the operator's changes (see `Admin`, which runs in another
//! process), or retry policy (a full queue is the caller's back-pressure).

use crate::conn::{self, Role};
use crate::error::{Result, StorageError};
use crate::failpoints::FailPoints;
use crate::reader::{self, ReadTask, Reader, ReaderMsg};
use crate::schema;
use crate::writer::{Reply, WriteOp, Writer, WriterMsg};
use crossbeam_channel::{bounded, Sender, TrySendError};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Most reader threads a store starts; more than the cores only adds
/// connections that wait on the same disk.
pub const READERS_MAX: usize = 64;

#[derive(Clone, Debug)]
pub struct Options {
    /// Most write ops in one transaction.
    pub batch_max: usize,
    /// Capacity of the write queue, and separately of the read queue.
    pub queue_capacity: usize,
    /// Reader threads (1..=`READERS_MAX`).
    pub readers: usize,
    pub failpoints: FailPoints,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            batch_max: 512,
            queue_capacity: 65_536,
            readers: 2,
            failpoints: FailPoints::default(),
        }
    }
}

impl Options {
    fn validate(&self) -> Result<()> {
        if self.batch_max == 0 {
            return Err(StorageError::Invalid("batch_max must be at least 1".into()));
        }
        if self.queue_capacity == 0 {
            return Err(StorageError::Invalid(
                "queue_capacity must be at least 1".into(),
            ));
        }
        if self.readers == 0 || self.readers > READERS_MAX {
            return Err(StorageError::Invalid(format!(
                "readers must be in 1..={READERS_MAX}, got {}",
                self.readers
            )));
        }
        Ok(())
    }
}

/// Counters shared with the storage threads.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) batches_committed: AtomicU64,
    pub(crate) batches_failed: AtomicU64,
    pub(crate) ops_committed: AtomicU64,
    pub(crate) ops_failed: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
}

/// A snapshot of the store's counters (for tests and metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Transactions committed by the writer.
    pub batches_committed: u64,
    /// Transactions rolled back as a whole (failed BEGIN/COMMIT, fail point).
    pub batches_failed: u64,
    /// Ops that succeeded in a committed transaction.
    pub ops_committed: u64,
    /// Ops whose reply (or log line) was an error.
    pub ops_failed: u64,
    /// WAL checkpoints run by the writer.
    pub checkpoints: u64,
    /// Ops waiting in the write queue right now.
    pub write_queue_len: usize,
    /// Jobs waiting in the read queue right now.
    pub read_queue_len: usize,
}

/// Lets `shutdown` know that no `submit`/`read` is between its "closed?"
/// check and its send, so that `Stop` is queued after every accepted
/// message. The top bit means closed; the rest counts callers in flight.
#[derive(Debug, Default)]
struct Gate(AtomicU64);

const CLOSED: u64 = 1 << 63;

impl Gate {
    /// Enters unless closed; the caller must `leave` after its send.
    fn enter(&self) -> bool {
        let previous = self.0.fetch_add(1, Ordering::AcqRel);
        if previous & CLOSED != 0 {
            self.leave();
            return false;
        }
        true
    }

    fn leave(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    /// Closes and waits for callers already inside. Each of them is between
    /// two atomic operations and a non-blocking `try_send`, so this spins
    /// only for a moment.
    fn close(&self) {
        self.0.fetch_or(CLOSED, Ordering::AcqRel);
        while self.0.load(Ordering::Acquire) & !CLOSED != 0 {
            std::thread::yield_now();
        }
    }
}

struct Inner {
    write_tx: Sender<WriterMsg>,
    read_tx: Sender<ReaderMsg>,
    gate: Gate,
    stats: Arc<Stats>,
    /// Writer first, then readers. Held for the whole of `shutdown`, so a
    /// second call waits for the first to finish.
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// The service's store. See the module docs.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens (creating the directory and file if needed) and migrates the
    /// database at `path`, then starts the writer thread and
    /// `opts.readers` reader threads, each with its own connection.
    pub fn open(path: &Path, opts: Options) -> Result<Store, StorageError> {
        opts.validate()?;
        conn::create_parent_dir(path)?;
        let writer_conn = conn::open(path, Role::Writer)?;
        schema::migrate(&writer_conn)?;
        let mut reader_conns = Vec::with_capacity(opts.readers);
        for _ in 0..opts.readers {
            reader_conns.push(conn::open(path, Role::Reader)?);
        }

        let (write_tx, write_rx) = bounded(opts.queue_capacity);
        let (read_tx, read_rx) = bounded(opts.queue_capacity);
        let stats = Arc::new(Stats::default());
        let store = Store {
            inner: Arc::new(Inner {
                write_tx,
                read_tx,
                gate: Gate::default(),
                stats: Arc::clone(&stats),
                threads: Mutex::new(Vec::with_capacity(opts.readers + 1)),
            }),
        };

        // The threads hold only their receivers and the stats, never the
        // `Inner`: when the last `Store` is dropped the senders go, and the
        // threads finish the queue and exit even without `shutdown`.
        let writer = Writer {
            conn: writer_conn,
            rx: write_rx,
            failpoints: opts.failpoints.clone(),
            stats,
            batch_max: opts.batch_max,
            db_path: path.to_path_buf(),
        };
        let spawned = std::thread::Builder::new()
            .name("dialproof-storage-writer".into())
            .spawn(move || writer.run());
        store.adopt(spawned)?;
        for (n, conn) in reader_conns.into_iter().enumerate() {
            let rx = read_rx.clone();
            let failpoints = opts.failpoints.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("dialproof-storage-reader-{n}"))
                .spawn(move || reader::run(Reader::from_connection(conn), rx, failpoints));
            store.adopt(spawned)?;
        }
        Ok(store)
    }

    /// Keeps a spawned thread's handle; if spawning failed, stops the
    /// threads already started and reports the failure.
    fn adopt(&self, spawned: std::io::Result<JoinHandle<()>>) -> Result<()> {
        match spawned {
            Ok(handle) => {
                self.lock_threads().push(handle);
                Ok(())
            }
            Err(e) => {
                self.shutdown();
                Err(StorageError::Sqlite(format!(
                    "cannot start a storage thread: {e}"
                )))
            }
        }
    }

    fn lock_threads(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        // A poisoned lock only means a panic elsewhere while it was held;
        // the vector of handles is still meaningful.
        self.inner
            .threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a write. Never blocks: `Err(QueueFull)` when the queue is at
    /// `queue_capacity`, `Err(Closed)` after `shutdown`. On `Err` the op
    /// (and its reply) is dropped without being called; on `Ok` its reply is
    /// called exactly once, on the writer thread, after the batch's COMMIT
    /// (or with the error that kept it from committing).
    pub fn submit(&self, op: WriteOp) -> Result<(), StorageError> {
        let inner = &self.inner;
        if !inner.gate.enter() {
            return Err(StorageError::Closed);
        }
        let sent = inner.write_tx.try_send(WriterMsg::Op(Box::new(op)));
        inner.gate.leave();
        match sent {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(StorageError::QueueFull),
            Err(TrySendError::Disconnected(_)) => Err(StorageError::Closed),
        }
    }

    /// Runs `job` on a reader thread and calls `reply` with its result.
    /// `reply` is always called exactly once: on the reader thread, or,
    /// when the read queue is full or the store is closed, right here on
    /// the caller's thread with `Err(QueueFull)` / `Err(Closed)`.
    pub fn read<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Reader) -> T + Send + 'static,
        reply: Reply<Result<T, StorageError>>,
    ) {
        let task: ReadTask = Box::new(move |reader: Result<&Reader, StorageError>| match reader {
            Ok(r) => {
                let value = job(r);
                reply(Ok(value))
            }
            Err(e) => reply(Err(e)),
        });
        let inner = &self.inner;
        if !inner.gate.enter() {
            task(Err(StorageError::Closed));
            return;
        }
        let sent = inner.read_tx.try_send(ReaderMsg::Task(task));
        inner.gate.leave();
        match sent {
            Ok(()) => {}
            Err(TrySendError::Full(ReaderMsg::Task(task))) => task(Err(StorageError::QueueFull)),
            Err(TrySendError::Disconnected(ReaderMsg::Task(task))) => {
                task(Err(StorageError::Closed))
            }
            Err(_) => {}
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> StoreStats {
        let s = &self.inner.stats;
        StoreStats {
            batches_committed: s.batches_committed.load(Ordering::Relaxed),
            batches_failed: s.batches_failed.load(Ordering::Relaxed),
            ops_committed: s.ops_committed.load(Ordering::Relaxed),
            ops_failed: s.ops_failed.load(Ordering::Relaxed),
            checkpoints: s.checkpoints.load(Ordering::Relaxed),
            write_queue_len: self.inner.write_tx.len(),
            read_queue_len: self.inner.read_tx.len(),
        }
    }

    /// Stops accepting work, lets the readers and the writer finish what
    /// is queued (every accepted op is committed and answered), truncates
    /// the WAL and joins the threads. Idempotent; a second call waits for
    /// the first. Call it from a thread of your own, not from a reply.
    pub fn shutdown(&self) {
        let inner = &self.inner;
        let mut threads = self.lock_threads();
        inner.gate.close();
        let on_storage_thread = threads
            .iter()
            .any(|h| h.thread().id() == std::thread::current().id());
        if on_storage_thread {
            // Called from a reply: joining ourselves would deadlock, and a
            // blocking send into our own full queue too. Closing the gate
            // already refuses new work; the threads stop when the last
            // `Store` is dropped.
            tracing::error!("Store::shutdown called on a storage thread; not waiting");
            return;
        }
        if threads.is_empty() {
            return;
        }
        // Readers first, so the writer's final TRUNCATE checkpoint does not
        // wait on our own readers. One `Stop` per reader thread that was
        // started (all but the first handle); a send fails only if every
        // reader is gone, which is what we want anyway.
        for _ in 1..threads.len() {
            let _ = inner.read_tx.send(ReaderMsg::Stop);
        }
        let _ = inner.write_tx.send(WriterMsg::Stop);
        let mut handles: Vec<JoinHandle<()>> = threads.drain(..).collect();
        // The writer is the first handle; join it last.
        let writer = if handles.is_empty() {
            None
        } else {
            Some(handles.remove(0))
        };
        for handle in handles.into_iter().chain(writer) {
            if handle.join().is_err() {
                tracing::error!("a storage thread panicked");
            }
        }
    }
}
