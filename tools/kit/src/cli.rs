//! The operator commands as a script runs them: `dialproof [--config F]
//! --json ARGS`, whose answer is the last JSON value on stdout.
//!
//! Not for: the service's own process (see [`crate::process`]).

use serde_json::Value;
use std::io::{self, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `bin [--config config] --json` ready for the command's arguments, with
/// colours off and stdin closed.
pub fn command(bin: &Path, config: Option<&Path>) -> Command {
    let mut c = Command::new(bin);
    if let Some(config) = config {
        c.arg("--config").arg(config);
    }
    c.arg("--json").env("NO_COLOR", "1").stdin(Stdio::null());
    c
}

/// Runs `command` with `input` on its stdin (a password, say).
pub fn output_with_input(mut command: Command, input: &str) -> io::Result<Output> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    child.wait_with_output()
}

/// The last line of stdout that is a JSON value.
pub fn json_of(out: &Output) -> Option<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l.trim()).ok())
}

/// `bin [--config config] --json args`: its JSON answer, or an error that
/// says what it printed when it failed or printed no JSON.
pub fn run(bin: &Path, config: Option<&Path>, args: &[&str]) -> io::Result<Value> {
    let out = command(bin, config).args(args).output()?;
    answer(args, &out)
}

/// The JSON answer of a finished command run (see [`run`]).
pub fn answer(args: &[&str], out: &Output) -> io::Result<Value> {
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "dialproof {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    json_of(out).ok_or_else(|| {
        io::Error::other(format!(
            "dialproof {args:?} printed no JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        ))
    })
}
