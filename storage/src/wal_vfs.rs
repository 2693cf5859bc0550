//! The writer's WAL file, written one commit at a time: a SQLite VFS that
//! is the default one ("unix") in everything but how a WAL file opened
//! through it is written.
//!
//! Why: SQLite writes each WAL frame as two `pwrite`s, its 24-byte header
//! and then its page, so a commit of 16 pages costs 32 system calls, each
//! paying ext4's per-call work (page-cache lookup, copy, dirtying) however
//! few its bytes. Under creates at 50 connections on a 2-core machine the
//! writer made 825,145 `pwrite`s in 5 s, a quarter of its samples; through
//! this VFS 34,089, and its CPU per create fell from 13.4 to 10.3 us
//! (benches/README.md, "The writer's WAL frames in one write a commit").
//!
//! How: a WAL file opened through [`NAME`] keeps the bytes SQLite writes
//! to it, while they follow each other, in a [`FrameBuffer`], and hands
//! them to the default VFS's file in one write when the page of a commit
//! frame arrives (the frame whose header carries the database's size in
//! pages: SQLite writes it last, and a commit is not done until that
//! write returns). The database file, its locks and shared memory, and
//! every other file go to the default VFS untouched.
//!
//! Why nothing committed can be lost or seen early:
//! - A commit frame's write returns only once the buffer is in the file
//!   (in the kernel's cache, as with the default VFS, which syncs only at
//!   checkpoints under `synchronous=NORMAL`): a process crash keeps what
//!   it kept before. If that write fails, the commit frame's write fails,
//!   and SQLite rolls the transaction back.
//! - Other connections and processes (readers, the checkpoint thread,
//!   Litestream, the operator CLI) find frames only through the
//!   wal-index, which SQLite updates after the commit frame was written.
//! - Before a read, sync, truncate, size query, file control or close of
//!   the WAL through this handle, the buffer is written first, so this
//!   connection never reads or cuts past what it wrote.
//! - Frames without a commit, which SQLite writes only when a transaction
//!   spills its page cache, could stay in the buffer after their
//!   transaction rolled back; the connection that uses this VFS runs with
//!   `cache_spill` off (`conn`), so its frames always end with a commit.
//!   Were a write to come anywhere but at the buffer's end, the buffer is
//!   written first: the file then holds what the default VFS would have
//!   written, in the order SQLite wrote it.
//!
//! Not for: any connection but the store's writer (readers never write;
//! the migration at open and the checkpoint thread use the default VFS),
//! or the database file's pages (the checkpoint writes those).
#![allow(unsafe_code)]

use rusqlite::ffi;
use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The VFS's name, given to `Connection::open_with_flags_and_vfs`.
pub(crate) const NAME: &str = "dialproof-wal";
const NAME_C: &CStr = c"dialproof-wal";

/// A WAL frame's header. Its bytes 4..8 hold the database's size in pages
/// after a commit frame, and 0 in every other frame.
const FRAME_HEADER_BYTES: usize = 24;
/// The WAL file's own header, before the first frame.
const WAL_HEADER_BYTES: i64 = 32;
/// Most bytes held, and written in one write: the default VFS's
/// `unixWrite` masks a write's length with 0x1ffff, so 128 KiB or more
/// would be cut short. A transaction larger than this reaches the file in
/// writes of about this size.
const WRITE_MAX: usize = 64 * 1024;

thread_local! {
    /// Writes asked of WAL files opened through this VFS on this thread,
    /// and writes made to the files: see [`thread_wal_writes`]. Per thread,
    /// not per process: a store's writer connection is used by its writer
    /// thread alone, so these are that store's counts, which its stats
    /// publish, however many stores a process (a test binary) runs.
    static ASKED: Cell<u64> = const { Cell::new(0) };
    static ISSUED: Cell<u64> = const { Cell::new(0) };
}

/// Writes SQLite asked of WAL files through this VFS, and the writes that
/// reached the files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WalWrites {
    pub(crate) asked: u64,
    pub(crate) issued: u64,
}

/// The calling thread's counts since it started.
pub(crate) fn thread_wal_writes() -> WalWrites {
    WalWrites {
        asked: ASKED.get(),
        issued: ISSUED.get(),
    }
}

/// Where buffered bytes go: the default VFS's file, or a test's record.
pub(crate) trait WriteAt {
    fn write_at(&mut self, bytes: &[u8], offset: i64) -> Result<(), c_int>;
}

/// The bytes SQLite wrote to a WAL file that have not reached it yet: one
/// run of consecutive writes.
#[derive(Default)]
pub(crate) struct FrameBuffer {
    bytes: Vec<u8>,
    /// The file offset of `bytes[0]`.
    start: i64,
    /// Where the page goes of the commit frame whose header came last.
    commit_page_at: Option<i64>,
}

impl FrameBuffer {
    fn end(&self) -> i64 {
        // A buffer holds at most WRITE_MAX bytes, or one longer write.
        self.start + self.bytes.len() as i64
    }

    /// Takes SQLite's write of `data` at `offset`; writes the buffer to
    /// `file` before it if `data` does not follow it (or would make one
    /// write too long), and after it if it ends a commit.
    pub(crate) fn write(
        &mut self,
        file: &mut impl WriteAt,
        data: &[u8],
        offset: i64,
    ) -> Result<(), c_int> {
        // Before a flush below, which forgets the commit frame's header.
        let ends_commit = self.commit_page_at.take() == Some(offset);
        let follows = offset == self.end() && self.bytes.len() + data.len() <= WRITE_MAX;
        if !self.bytes.is_empty() && !follows {
            self.flush(file)?;
        }
        if self.bytes.is_empty() {
            self.start = offset;
        }
        self.bytes.extend_from_slice(data);
        if is_commit_frame_header(data, offset) {
            self.commit_page_at = Some(offset + FRAME_HEADER_BYTES as i64);
        }
        if ends_commit {
            self.flush(file)?;
        }
        Ok(())
    }

    /// Writes what is held to `file` in one write. Either way the buffer
    /// is empty after: bytes that failed belonged to a commit that now
    /// fails with the error.
    pub(crate) fn flush(&mut self, file: &mut impl WriteAt) -> Result<(), c_int> {
        if self.bytes.is_empty() {
            return Ok(());
        }
        let result = file.write_at(&self.bytes, self.start);
        self.bytes.clear();
        self.bytes.shrink_to(WRITE_MAX);
        self.commit_page_at = None;
        result
    }
}

fn is_commit_frame_header(data: &[u8], offset: i64) -> bool {
    offset >= WAL_HEADER_BYTES && data.len() == FRAME_HEADER_BYTES && data[4..8] != [0; 4]
}

/// Registers the VFS once per process; every later call returns the first
/// call's answer.
pub(crate) fn register() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    // SAFETY: sqlite3_vfs_find and sqlite3_vfs_register are thread-safe in
    // SQLite's multi-thread mode, and the OnceLock runs this once.
    REGISTERED
        .get_or_init(|| unsafe { register_once() })
        .clone()
}

/// The default VFS, which every call not about a WAL write goes to.
static DEFAULT: AtomicPtr<ffi::sqlite3_vfs> = AtomicPtr::new(ptr::null_mut());

unsafe fn register_once() -> Result<(), String> {
    let default = ffi::sqlite3_vfs_find(ptr::null());
    if default.is_null() {
        return Err("SQLite has no default VFS".to_owned());
    }
    DEFAULT.store(default, Ordering::Release);
    // A copy of the default VFS: its own functions for paths, randomness
    // and time (they do not depend on the file size below), and room in
    // each file for a WalFile before the default VFS's own file.
    let mut vfs = *default;
    vfs.pNext = ptr::null_mut();
    vfs.zName = NAME_C.as_ptr();
    let Ok(size) = c_int::try_from(INNER_AT + (*default).szOsFile as usize) else {
        return Err("the default VFS's file is too large".to_owned());
    };
    vfs.szOsFile = size;
    vfs.xOpen = Some(open);
    // Leaked: SQLite keeps the pointer for the life of the process.
    let vfs = Box::leak(Box::new(vfs));
    match ffi::sqlite3_vfs_register(vfs, 0) {
        ffi::SQLITE_OK => Ok(()),
        rc => Err(format!("sqlite3_vfs_register failed with code {rc}")),
    }
}

/// A WAL file opened through this VFS: SQLite's file handle, the buffer,
/// then (at [`INNER_AT`]) the default VFS's file.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    buffer: FrameBuffer,
}

/// Where the default VFS's file starts in ours (a multiple of WalFile's
/// alignment, so the inner file is as aligned as SQLite's allocation).
const INNER_AT: usize = std::mem::size_of::<WalFile>();

/// The default VFS's file inside ours.
unsafe fn inner(file: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    file.cast::<u8>().add(INNER_AT).cast()
}

struct Inner(*mut ffi::sqlite3_file);

impl WriteAt for Inner {
    fn write_at(&mut self, bytes: &[u8], offset: i64) -> Result<(), c_int> {
        let mut at = offset;
        for part in bytes.chunks(WRITE_MAX) {
            // WRITE_MAX fits a c_int; parts are never longer.
            let len = part.len() as c_int;
            ISSUED.set(ISSUED.get() + 1);
            // SAFETY: self.0 is an open file of the default VFS (open()
            // made it), and part outlives the call.
            let rc = unsafe {
                match (*(*self.0).pMethods).xWrite {
                    Some(write) => write(self.0, part.as_ptr().cast(), len, at),
                    None => ffi::SQLITE_IOERR_WRITE,
                }
            };
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            at += i64::from(len);
        }
        Ok(())
    }
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let default = DEFAULT.load(Ordering::Acquire);
    let Some(default_open) = (*default).xOpen else {
        return ffi::SQLITE_CANTOPEN;
    };
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // The database and every other file: the default VFS's own,
        // in the first bytes of the room SQLite allocated.
        return default_open(default, name, file, flags, out_flags);
    }
    let wal = file.cast::<WalFile>();
    // SAFETY: SQLite allocated szOsFile bytes at file, room for a WalFile
    // and the default VFS's file after it.
    ptr::write(ptr::addr_of_mut!((*wal).buffer), FrameBuffer::default());
    let inner = inner(file);
    let rc = default_open(default, name, inner, flags, out_flags);
    // SQLite closes a file whose methods are set, even after a failed
    // open; the default VFS leaves them unset when there is nothing to
    // close.
    (*wal).base.pMethods = if (*inner).pMethods.is_null() {
        ptr::null()
    } else {
        &WAL_METHODS
    };
    rc
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // Version 1: a WAL file has no shared memory or memory map of its own.
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

/// Writes the buffer, then gives the default VFS's file: every method but
/// xWrite starts here.
unsafe fn flushed(file: *mut ffi::sqlite3_file) -> Result<*mut ffi::sqlite3_file, c_int> {
    let inner = inner(file);
    (*file.cast::<WalFile>()).buffer.flush(&mut Inner(inner))?;
    Ok(inner)
}

/// Calls the default VFS's method `$method` on the file after writing the
/// buffer; `$missing` if that VFS has no such method.
macro_rules! delegate {
    ($file:expr, $method:ident, $missing:expr $(, $arg:expr)*) => {
        match flushed($file) {
            Err(rc) => rc,
            Ok(inner) => match (*(*inner).pMethods).$method {
                Some(method) => method(inner $(, $arg)*),
                None => $missing,
            },
        }
    };
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let flushed = flushed(file);
    let inner = inner(file);
    let rc = match (*(*inner).pMethods).xClose {
        Some(close) => close(inner),
        None => ffi::SQLITE_OK,
    };
    ptr::drop_in_place(ptr::addr_of_mut!((*file.cast::<WalFile>()).buffer));
    match flushed {
        Err(e) => e,
        Ok(_) => rc,
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    ASKED.set(ASKED.get() + 1);
    let Ok(len) = usize::try_from(amount) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    if len == 0 {
        // Nothing to hold (and a slice may not be made from a null data).
        return ffi::SQLITE_OK;
    }
    // SAFETY: SQLite hands `amount` readable bytes at data for the call.
    let data = std::slice::from_raw_parts(data.cast::<u8>(), len);
    let buffer = &mut (*file.cast::<WalFile>()).buffer;
    match buffer.write(&mut Inner(inner(file)), data, offset) {
        Ok(()) => ffi::SQLITE_OK,
        Err(rc) => rc,
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    out: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    delegate!(file, xRead, ffi::SQLITE_IOERR_READ, out, amount, offset)
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    delegate!(file, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    delegate!(file, xSync, ffi::SQLITE_IOERR_FSYNC, flags)
}

unsafe extern "C" fn file_size(
    file: *mut ffi::sqlite3_file,
    size: *mut ffi::sqlite3_int64,
) -> c_int {
    delegate!(file, xFileSize, ffi::SQLITE_IOERR_FSTAT, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    delegate!(file, xLock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    delegate!(file, xUnlock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    delegate!(file, xCheckReservedLock, ffi::SQLITE_OK, out)
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    delegate!(file, xFileControl, ffi::SQLITE_NOTFOUND, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let inner = inner(file);
    (*(*inner).pMethods).xSectorSize.map_or(0, |f| f(inner))
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let inner = inner(file);
    (*(*inner).pMethods)
        .xDeviceCharacteristics
        .map_or(0, |f| f(inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writes that reached the "file".
    #[derive(Default)]
    struct Recorded(Vec<(i64, Vec<u8>)>);

    impl WriteAt for Recorded {
        fn write_at(&mut self, bytes: &[u8], offset: i64) -> Result<(), c_int> {
            self.0.push((offset, bytes.to_vec()));
            Ok(())
        }
    }

    const PAGE: usize = 1024;
    const FRAME: i64 = (FRAME_HEADER_BYTES + PAGE) as i64;

    fn header(commit_pages: u32) -> Vec<u8> {
        let mut h = vec![0u8; FRAME_HEADER_BYTES];
        h[0..4].copy_from_slice(&7u32.to_be_bytes());
        h[4..8].copy_from_slice(&commit_pages.to_be_bytes());
        h
    }

    /// Frames `first..first + count` as SQLite writes them, the last a
    /// commit frame if `commit`.
    fn frames(buffer: &mut FrameBuffer, file: &mut Recorded, first: i64, count: i64, commit: bool) {
        for i in first..first + count {
            let at = WAL_HEADER_BYTES + i * FRAME;
            let size = if commit && i == first + count - 1 {
                100
            } else {
                0
            };
            buffer.write(file, &header(size), at).unwrap();
            buffer
                .write(file, &[i as u8; PAGE], at + FRAME_HEADER_BYTES as i64)
                .unwrap();
        }
    }

    #[test]
    fn a_commit_reaches_the_file_in_one_write_when_its_commit_frame_does() {
        let (mut buffer, mut file) = (FrameBuffer::default(), Recorded::default());
        buffer.write(&mut file, &[1; 32], 0).unwrap();
        frames(&mut buffer, &mut file, 0, 15, false);
        assert!(
            file.0.is_empty(),
            "nothing is written before the commit frame"
        );
        frames(&mut buffer, &mut file, 15, 1, true);
        assert_eq!(file.0.len(), 1, "design choice: one write per commit");
        let (at, bytes) = &file.0[0];
        assert_eq!(
            (*at, bytes.len() as i64),
            (0, WAL_HEADER_BYTES + 16 * FRAME)
        );
        // Byte for byte what SQLite wrote, in place.
        assert_eq!(bytes[..32], [1; 32]);
        let last = (WAL_HEADER_BYTES + 15 * FRAME) as usize;
        assert_eq!(bytes[last..last + FRAME_HEADER_BYTES], header(100)[..]);
        assert_eq!(bytes[last + FRAME_HEADER_BYTES..], [15; PAGE]);
        // The next commit starts a new write where this one ended.
        frames(&mut buffer, &mut file, 16, 2, true);
        assert_eq!(file.0.len(), 2);
        assert_eq!(file.0[1].0, WAL_HEADER_BYTES + 16 * FRAME);
    }

    #[test]
    fn a_write_elsewhere_writes_what_is_held_first_and_in_order() {
        let (mut buffer, mut file) = (FrameBuffer::default(), Recorded::default());
        frames(&mut buffer, &mut file, 4, 2, false);
        // SQLite rewriting an earlier frame's page (a page written twice
        // in one transaction): the held frames go first, then this.
        let at = WAL_HEADER_BYTES + 4 * FRAME + FRAME_HEADER_BYTES as i64;
        buffer.write(&mut file, &[9; PAGE], at).unwrap();
        assert_eq!(
            file.0.len(),
            1,
            "the held run was written before the rewrite"
        );
        assert_eq!(file.0[0].0, WAL_HEADER_BYTES + 4 * FRAME);
        buffer.flush(&mut file).unwrap();
        assert_eq!(file.0[1], (at, vec![9; PAGE]), "then the rewrite, as given");
        buffer.flush(&mut file).unwrap();
        assert_eq!(file.0.len(), 2, "an empty buffer writes nothing");
    }

    #[test]
    fn a_long_transaction_is_written_in_parts_the_default_vfs_takes() {
        let (mut buffer, mut file) = (FrameBuffer::default(), Recorded::default());
        let count = 3 * WRITE_MAX as i64 / FRAME;
        frames(&mut buffer, &mut file, 0, count, true);
        let parts = file.0.len();
        // 3 * WRITE_MAX less part of a frame, cut at frame boundaries.
        assert!((3..=4).contains(&parts), "{parts} writes");
        assert!(
            file.0.iter().all(|(_, b)| b.len() <= WRITE_MAX),
            "no write over the default VFS's"
        );
        let mut next = WAL_HEADER_BYTES;
        for (at, bytes) in &file.0 {
            assert_eq!(*at, next, "the parts follow each other");
            next += bytes.len() as i64;
        }
        assert_eq!(next, WAL_HEADER_BYTES + count * FRAME);
    }

    #[test]
    fn a_commit_frames_page_that_does_not_fit_is_still_written_at_once() {
        let (mut buffer, mut file) = (FrameBuffer::default(), Recorded::default());
        // Held bytes that leave room for the commit frame's header and not
        // for its page.
        let held = WRITE_MAX - FRAME_HEADER_BYTES - 10;
        buffer
            .write(&mut file, &vec![3; held], WAL_HEADER_BYTES)
            .unwrap();
        let header_at = WAL_HEADER_BYTES + held as i64;
        buffer.write(&mut file, &header(5), header_at).unwrap();
        assert!(file.0.is_empty());
        let page_at = header_at + FRAME_HEADER_BYTES as i64;
        buffer.write(&mut file, &[4; PAGE], page_at).unwrap();
        assert_eq!(
            file.0.len(),
            2,
            "what was held, then the page, before the write returns"
        );
        assert_eq!(file.0[1], (page_at, vec![4; PAGE]));
        buffer.flush(&mut file).unwrap();
        assert_eq!(file.0.len(), 2, "nothing of the commit was left behind");
    }

    #[test]
    fn a_failed_write_fails_the_commit_and_leaves_nothing_held() {
        struct Full;
        impl WriteAt for Full {
            fn write_at(&mut self, _: &[u8], _: i64) -> Result<(), c_int> {
                Err(ffi::SQLITE_FULL)
            }
        }
        let mut buffer = FrameBuffer::default();
        buffer
            .write(&mut Full, &header(0), WAL_HEADER_BYTES)
            .unwrap();
        buffer
            .write(&mut Full, &[1; PAGE], WAL_HEADER_BYTES + 24)
            .unwrap();
        buffer
            .write(&mut Full, &header(3), WAL_HEADER_BYTES + FRAME)
            .unwrap();
        let page_at = WAL_HEADER_BYTES + FRAME + FRAME_HEADER_BYTES as i64;
        assert_eq!(
            buffer.write(&mut Full, &[2; PAGE], page_at),
            Err(ffi::SQLITE_FULL)
        );
        let mut file = Recorded::default();
        buffer.flush(&mut file).unwrap();
        assert!(
            file.0.is_empty(),
            "a failed commit's frames are not written later"
        );
    }

    #[test]
    fn only_a_frame_header_with_a_database_size_ends_a_commit() {
        assert!(is_commit_frame_header(&header(1), WAL_HEADER_BYTES));
        assert!(!is_commit_frame_header(&header(0), WAL_HEADER_BYTES));
        // The WAL header's first 24 bytes are not a frame's.
        assert!(!is_commit_frame_header(&header(1), 0));
        assert!(!is_commit_frame_header(&[1; PAGE], WAL_HEADER_BYTES + 24));
    }
}
