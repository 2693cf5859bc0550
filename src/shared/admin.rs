//! The service's one operator connection (`dialproof_storage::Admin`), for
//! the dashboard's changes (keys, webhook settings, logout): opened once at
//! start, like the store's writer and readers, then lent to one change at a
//! time on the offload pool (SQLite blocks the thread that runs it, so never
//! a worker thread's).
//!
//! Opening a connection checks the schema and migrates it, so a connection
//! per request would repeat that work on every form; `dialproof_storage`
//! logs each open at DEBUG ("operator connection opened"), which is how a
//! test sees that the dashboard opens exactly one.
//!
//! Not for: the hot path's writes (the store's writer), reads (the store's
//! readers), or the operator CLI, which runs in a process of its own with a
//! connection of its own.

use crate::shared::offload::Offload;
use dialproof_storage::{Admin, StorageError};
use parking_lot::Mutex;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct AdminConn {
    admin: Arc<Mutex<Admin>>,
    offload: Offload,
}

impl AdminConn {
    /// Opens the connection; changes will run on `offload`'s threads.
    pub fn open(path: &Path, offload: Offload) -> Result<AdminConn, StorageError> {
        Ok(AdminConn {
            admin: Arc::new(Mutex::new(Admin::open(path)?)),
            offload,
        })
    }

    /// Runs `f` with the connection on the offload pool and waits up to
    /// `wait` for it. `None`: no answer in time (or the pool is full).
    pub fn run<T: Send + 'static>(
        &self,
        wait: Duration,
        f: impl FnOnce(&Admin) -> Result<T, StorageError> + Send + 'static,
    ) -> Option<Result<T, StorageError>> {
        let admin = self.admin.clone();
        // A thread-blocking lock is right here: the job runs on an offload
        // thread, and changes wait for one another only as long as one
        // SQLite transaction of the operator's takes.
        self.offload.run(wait, move || f(&admin.lock()))
    }
}
