//! Where the process's log lines go: standard error, written in batches by a
//! thread of its own, at most [`FLUSH_DELAY`] after a line is logged.
//!
//! Why: the service logs a line for every create, call and webhook, and
//! each line was one `write` to standard error on the thread that logged
//! it: on a worker for a create, on the SQLite writer for a completed call.
//! A profile of 50 connections creating put about 3 % of the server's CPU
//! in those writes. Here a line is appended to a buffer under a lock that
//! no write holds; the first line into an empty buffer rings the writing
//! thread, which waits [`FLUSH_DELAY`] for more, takes them all and writes
//! them in one go.
//!
//! What is kept: lines leave in the order they were logged (one buffer;
//! whoever writes holds the output while it takes the buffer and writes).
//! The buffer is bounded ([`BUFFER_MAX`]): a line that would overflow it
//! is written, after what is buffered, by the thread that logged it, so a
//! standard error that does not drain (a stalled journal) holds up the
//! loggers as it did before, instead of growing memory. What
//! can be lost: the last [`FLUSH_DELAY`] of lines when the process is
//! killed outright (SIGKILL, an abort). A panic writes what is buffered
//! before its own message (`install_panic_flush`), and the binary flushes
//! before it exits ([`flush`]).
//!
//! Not for: what is logged or how a line looks (the binary's logging set-up
//! chooses the filter and the text or JSON format).

use parking_lot::Mutex;
use std::io::{self, Write};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;
use tracing_subscriber::fmt::MakeWriter;

/// Longest a logged line waits in the buffer.
pub const FLUSH_DELAY: Duration = Duration::from_millis(5);
/// Most bytes buffered (a few thousand lines).
pub const BUFFER_MAX: usize = 256 * 1024;

/// A buffer of log lines in front of one output, and its writing thread.
pub struct LogSink {
    /// Lines not yet taken for writing. Held only to append or to take
    /// them, never across a write, so a thread that logs (a coroutine's
    /// worker among them) does not wait for the output.
    buffer: Mutex<Vec<u8>>,
    /// The output, held for the whole of a write: whoever holds it takes
    /// the buffered lines and writes them, so lines leave in the order
    /// they were appended.
    output: Mutex<Output>,
    writer_thread: OnceLock<Thread>,
}

struct Output {
    out: Box<dyn Write + Send>,
    /// The buffer's other half: lines are swapped into it and written from
    /// it, so neither half is allocated again.
    taken: Vec<u8>,
}

impl LogSink {
    /// A sink in front of `out`, with its writing thread started.
    pub fn start(out: Box<dyn Write + Send>) -> io::Result<Arc<LogSink>> {
        let sink = Arc::new(LogSink {
            buffer: Mutex::new(Vec::with_capacity(BUFFER_MAX)),
            output: Mutex::new(Output {
                out,
                taken: Vec::with_capacity(BUFFER_MAX),
            }),
            writer_thread: OnceLock::new(),
        });
        let weak = Arc::downgrade(&sink);
        let thread = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || loop {
                std::thread::park();
                // Lines logged meanwhile leave with the one that rang.
                std::thread::sleep(FLUSH_DELAY);
                match weak.upgrade() {
                    Some(sink) => sink.flush(),
                    None => return,
                }
            })?;
        // Set once, here, before any line can ring it.
        let _ = sink.writer_thread.set(thread.thread().clone());
        Ok(sink)
    }

    /// Buffers one line; if the buffer is full, writes what is buffered and
    /// then the line, on this thread.
    fn append(&self, line: &[u8]) {
        let mut buffer = self.buffer.lock();
        if buffer.len() + line.len() <= BUFFER_MAX {
            let was_empty = buffer.is_empty();
            buffer.extend_from_slice(line);
            drop(buffer);
            if was_empty {
                if let Some(thread) = self.writer_thread.get() {
                    thread.unpark();
                }
            }
            return;
        }
        drop(buffer);
        self.write_out(&mut self.output.lock(), line);
    }

    /// Writes every buffered line now.
    pub fn flush(&self) {
        self.write_out(&mut self.output.lock(), b"");
    }

    /// [`Self::flush`], unless another thread holds the output or the
    /// buffer (a panic inside a write must not wait for itself).
    fn try_flush(&self) {
        if let Some(mut output) = self.output.try_lock() {
            if let Some(mut buffer) = self.buffer.try_lock() {
                std::mem::swap(&mut *buffer, &mut output.taken);
            }
            write_taken(&mut output, b"");
        }
    }

    /// Takes the buffered lines and writes them, then `after`, holding the
    /// output throughout.
    fn write_out(&self, output: &mut Output, after: &[u8]) {
        std::mem::swap(&mut *self.buffer.lock(), &mut output.taken);
        write_taken(output, after);
    }
}

/// Writes the taken lines, then `after`. A failed write (standard error
/// closed) drops them: there is nowhere else to put a log line.
fn write_taken(output: &mut Output, after: &[u8]) {
    if output.taken.is_empty() && after.is_empty() {
        return;
    }
    let _ = output.out.write_all(&output.taken);
    let _ = output.out.write_all(after);
    let _ = output.out.flush();
    output.taken.clear();
}

/// The process's sink in front of standard error, once started.
static STDERR: OnceLock<Arc<LogSink>> = OnceLock::new();

/// The process's sink in front of standard error, started on first use.
pub fn stderr() -> Arc<LogSink> {
    STDERR
        .get_or_init(|| {
            // A process that cannot start one thread cannot serve either.
            LogSink::start(Box::new(io::stderr())).expect("start the log writer thread")
        })
        .clone()
}

/// Writes the buffered lines of the standard error sink, if it was started:
/// what the binary does before it exits.
pub fn flush() {
    if let Some(sink) = STDERR.get() {
        sink.flush();
    }
}

/// Makes every panic write the buffered lines before its own message, so
/// the lines that led to it come first.
pub fn install_panic_flush() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(sink) = STDERR.get() {
            sink.try_flush();
        }
        default(info)
    }));
}

/// What the tracing subscriber writes each formatted line to.
pub struct LineWriter(Arc<LogSink>);

impl Write for LineWriter {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        self.0.append(line);
        Ok(line.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        // A line is written within FLUSH_DELAY; waiting for it here would
        // put the write back on the logging thread.
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogSinkHandle {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter(self.0.clone())
    }
}

/// A [`LogSink`] as the tracing subscriber's writer.
#[derive(Clone)]
pub struct LogSinkHandle(pub Arc<LogSink>);

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An output that keeps what it is given, and counts the writes.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<(Vec<u8>, usize)>>);

    impl Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            let mut kept = self.0.lock();
            kept.0.extend_from_slice(bytes);
            kept.1 += 1;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Kept {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().0.clone()).expect("utf-8")
        }
        fn writes(&self) -> usize {
            self.0.lock().1
        }
    }

    fn line(n: usize) -> String {
        format!("line {n}\n")
    }

    #[test]
    fn lines_arrive_in_order_and_in_few_writes_without_a_flush() {
        let out = Kept::default();
        let sink = LogSink::start(Box::new(out.clone())).expect("sink");
        let mut writer = LogSinkHandle(sink).make_writer();
        for n in 0..1000 {
            writer.write_all(line(n).as_bytes()).expect("write");
        }
        let expected: String = (0..1000).map(line).collect();
        let started = Instant::now();
        while out.text() != expected {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "lines written: {}",
                out.text().len()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            out.writes() < 1000,
            "batched: {} writes for 1000 lines",
            out.writes()
        );
    }

    #[test]
    fn flush_writes_what_is_buffered_at_once() {
        let out = Kept::default();
        let sink = LogSink::start(Box::new(out.clone())).expect("sink");
        LogSinkHandle(sink.clone())
            .make_writer()
            .write_all(b"one\n")
            .expect("write");
        sink.flush();
        assert_eq!(out.text(), "one\n");
    }

    #[test]
    fn a_line_that_overflows_the_buffer_is_written_after_what_is_buffered() {
        let out = Kept::default();
        let sink = LogSink::start(Box::new(out.clone())).expect("sink");
        let mut writer = LogSinkHandle(sink).make_writer();
        writer.write_all(b"first\n").expect("write");
        let big = "x".repeat(BUFFER_MAX) + "\n";
        writer.write_all(big.as_bytes()).expect("write");
        // Written by the logging thread itself, without waiting for the
        // writing thread.
        assert_eq!(out.text(), format!("first\n{big}"));
    }
}
