//! The service's handle on the database: one writer thread, N reader
//! threads, bounded queues to both, and an orderly shutdown.
//!
//! `Store` is a cheap `Clone` (an `Arc`). Its methods never block on SQLite
//! but one: `submit` and `read` only enqueue (or fail at once with
//! `QueueFull` / `Closed`), so they are safe to call from a may coroutine;
//! `read_here` runs a point read on the calling thread, which costs less
//! than the hand-off to a reader thread would (see `local_reader`). Results arrive
//! through the reply callbacks, on the storage threads; what must follow a
//! commit reaches the binary's commit consumer through the [`CommitSink`]
//! given to [`Store::open_with_commit_sink`].
//!
//! Not for: the operator's changes (see `Admin`, which runs in another
//! process), retry policy (a full queue is the caller's back-pressure), or
//! running writes and reads (see `writer` and `reader`).

use crate::checkpoint::{self, Checkpointer, Replication};
use crate::committed::CommitSink;
use crate::conn::{self, Role};
use crate::error::{Result, StorageError};
use crate::failpoints::FailPoints;
use crate::handoff::{self, Refused};
use crate::local_reader;
use crate::ops::{Reply, WriteOp};
use crate::reader::{self, ReadTask, Reader, ReaderMsg};
use crate::schema;
use crate::stats::{Counters, StoreStats};
use crate::writer::{BatchContext, Writer};
use crossbeam_channel::{bounded, Sender, TrySendError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Most reader threads a store starts; more than the cores only adds
/// connections that wait on the same disk.
pub const READERS_MAX: usize = 64;
/// [`Options::batch_max`] unless set.
pub const BATCH_MAX_DEFAULT: usize = 512;
/// [`Options::queue_capacity`] unless set: how many writes (and, apart,
/// reads) may wait before callers are told `QueueFull` and shed load.
pub const QUEUE_CAPACITY_DEFAULT: usize = 65_536;
/// [`Options::readers`] unless set.
pub const READERS_DEFAULT: usize = 2;

#[derive(Clone, Debug)]
pub struct Options {
    /// Most write ops in one transaction.
    pub batch_max: usize,
    /// Capacity of the write queue, and separately of the read queue.
    pub queue_capacity: usize,
    /// Reader threads (1..=[`READERS_MAX`]).
    pub readers: usize,
    /// Whether Litestream replicates the file (the writer then never
    /// resets the WAL; see `Replication`).
    pub replication: Replication,
    pub failpoints: FailPoints,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            batch_max: BATCH_MAX_DEFAULT,
            queue_capacity: QUEUE_CAPACITY_DEFAULT,
            readers: READERS_DEFAULT,
            replication: Replication::Off,
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
    /// This store's identity for the calling threads' own readers.
    id: u64,
    path: PathBuf,
    failpoints: FailPoints,
    write_tx: handoff::Sender<Box<WriteOp>>,
    read_tx: Sender<ReaderMsg>,
    gate: Gate,
    counters: Arc<Counters>,
    /// Writer first, then readers. Held for the whole of `shutdown`, so a
    /// second call waits for the first to finish.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The checkpoint thread; it ends after the writer's last batch.
    checkpoint_thread: Mutex<Option<JoinHandle<()>>>,
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
    /// Commits are reported only through replies; the service opens with
    /// [`Store::open_with_commit_sink`] instead.
    pub fn open(path: &Path, opts: Options) -> Result<Store, StorageError> {
        Store::start(path, opts, None)
    }

    /// Like [`Store::open`], and the writer hands every committed batch's
    /// events to `sink` (see [`CommitSink`] for the contract). Keep its
    /// receiver until `shutdown` returns and drain it: the last batches
    /// arrive while the writer finishes its queue.
    pub fn open_with_commit_sink(
        path: &Path,
        opts: Options,
        sink: CommitSink,
    ) -> Result<Store, StorageError> {
        Store::start(path, opts, Some(sink))
    }

    fn start(path: &Path, opts: Options, sink: Option<CommitSink>) -> Result<Store> {
        opts.validate()?;
        conn::create_parent_dir(path)?;
        let writer_conn = conn::open(path, Role::Writer)?;
        let forcer = Checkpointer::new(&writer_conn, path, opts.replication)?;
        {
            // The migration on a connection of its own (see Role::Upkeep),
            // with the writer's WAL settings, so that none of its commits
            // runs SQLite's own checkpoint. Opened after the writer's, so
            // that closing it is not the last close, which would
            // checkpoint and delete the WAL.
            let migration_conn = conn::open(path, Role::Upkeep)?;
            checkpoint::prepare_writer(&migration_conn, opts.replication)?;
            schema::migrate(&migration_conn)?;
        }
        let checkpoint_conn = conn::open(path, Role::Upkeep)?;
        let checkpointer = Checkpointer::new(&checkpoint_conn, path, opts.replication)?
            .syncing_database_file(path);
        let mut reader_conns = Vec::with_capacity(opts.readers);
        for _ in 0..opts.readers {
            reader_conns.push(conn::open(path, Role::Reader)?);
        }

        let (write_tx, write_rx) = handoff::queue(opts.queue_capacity);
        let (read_tx, read_rx) = bounded(opts.queue_capacity);
        let counters = Arc::new(Counters::default());
        let store = Store {
            inner: Arc::new(Inner {
                id: local_reader::next_store_id(),
                path: path.to_owned(),
                failpoints: opts.failpoints.clone(),
                write_tx,
                read_tx,
                gate: Gate::default(),
                counters: Arc::clone(&counters),
                threads: Mutex::new(Vec::with_capacity(opts.readers + 1)),
                checkpoint_thread: Mutex::new(None),
            }),
        };

        // The threads hold only their receivers and the counters, never
        // the `Inner`: when the last `Store` is dropped the senders go, and
        // the threads finish the queue and exit even without `shutdown`.
        let (doorbell, rung) = bounded(1);
        let writer = Writer {
            conn: writer_conn,
            doorbell,
            checkpointer: forcer,
            rx: write_rx,
            batch_max: opts.batch_max,
            context: BatchContext {
                failpoints: opts.failpoints.clone(),
                counters,
                commit_sink: sink,
            },
        };
        let checkpoint_counters = Arc::clone(&store.inner.counters);
        // Thread names fit Linux's 15 bytes, so `top -H`, `ps -L` and
        // profilers tell the writer from the checkpointer and the readers.
        let spawned = std::thread::Builder::new()
            .name("db-checkpoint".into())
            .spawn(move || {
                checkpoint::run_thread(checkpoint_conn, checkpointer, rung, checkpoint_counters)
            });
        match spawned {
            Ok(handle) => *store.lock_checkpoint_thread() = Some(handle),
            Err(e) => {
                return Err(StorageError::Sqlite(format!(
                    "cannot start the checkpoint thread: {e}"
                )))
            }
        }
        let spawned = std::thread::Builder::new()
            .name("db-writer".into())
            .spawn(move || writer.run());
        store.adopt(spawned)?;
        for (n, conn) in reader_conns.into_iter().enumerate() {
            let rx = read_rx.clone();
            let failpoints = opts.failpoints.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("db-reader-{n}"))
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

    fn lock_checkpoint_thread(&self) -> std::sync::MutexGuard<'_, Option<JoinHandle<()>>> {
        // As `lock_threads`: a poisoned lock still holds a meaningful handle.
        self.inner
            .checkpoint_thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
    /// (or with the error that kept it from committing), and after the
    /// batch's events went to the commit sink.
    pub fn submit(&self, op: WriteOp) -> Result<(), StorageError> {
        let inner = &self.inner;
        if !inner.gate.enter() {
            return Err(StorageError::Closed);
        }
        let sent = inner.write_tx.try_send(Box::new(op));
        inner.gate.leave();
        match sent {
            Ok(_) => Ok(()),
            Err(Refused::Full(_)) => Err(StorageError::QueueFull),
            Err(Refused::Closed(_)) => Err(StorageError::Closed),
        }
    }

    /// Runs `job` at once on the calling thread, with that thread's own
    /// read-only connection to this database (opened on first use; see
    /// `local_reader`). For point reads only (a verification by its id):
    /// it blocks the thread for as long as the query runs. `Err(Closed)`
    /// after `shutdown`.
    pub fn read_here<T>(&self, job: impl FnOnce(&Reader) -> Result<T>) -> Result<T> {
        let inner = &self.inner;
        if !inner.gate.enter() {
            return Err(StorageError::Closed);
        }
        // Only the check: the gate guards sends into the queues, and a
        // read here sends nothing.
        inner.gate.leave();
        local_reader::with_reader(inner.id, &inner.path, &inner.failpoints, job)
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
        let s = &self.inner.counters;
        let (batch_ops, batch_ops_sum) = s.batch_ops.snapshot();
        let (commit_seconds, commit_micros_sum) = s.commit_micros.snapshot();
        StoreStats {
            batch_ops,
            batch_ops_sum,
            commit_seconds,
            commit_micros_sum,
            batches_committed: s.batches_committed.load(Ordering::Relaxed),
            batches_failed: s.batches_failed.load(Ordering::Relaxed),
            batches_rerun: s.batches_rerun.load(Ordering::Relaxed),
            last_batch_failed: s.last_batch_failed.load(Ordering::Relaxed),
            ops_committed: s.ops_committed.load(Ordering::Relaxed),
            ops_failed: s.ops_failed.load(Ordering::Relaxed),
            checkpoints: s.checkpoints.load(Ordering::Relaxed),
            wal_writes_asked: s.wal_writes_asked.load(Ordering::Relaxed),
            wal_writes_issued: s.wal_writes_issued.load(Ordering::Relaxed),
            write_queue_len: self.inner.write_tx.len(),
            read_queue_len: self.inner.read_tx.len(),
            committed_batches_queued: s.committed_batches_queued.load(Ordering::Relaxed),
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
        // After the gate closed: every accepted op is already queued.
        inner.write_tx.close();
        let mut handles: Vec<JoinHandle<()>> = threads.drain(..).collect();
        // The writer is the first handle; join it last.
        let writer = if handles.is_empty() {
            None
        } else {
            Some(handles.remove(0))
        };
        // The checkpoint thread last: it runs the final checkpoint once the
        // writer is gone.
        let checkpoints = self.lock_checkpoint_thread().take();
        for handle in handles.into_iter().chain(writer).chain(checkpoints) {
            if handle.join().is_err() {
                tracing::error!("a storage thread panicked");
            }
        }
    }
}
