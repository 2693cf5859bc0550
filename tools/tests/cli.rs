//! The tools' command lines, without a service: what they refuse before
//! sending anything.
//!
//! Not for: the runs against the real service (the workspace's
//! `tests/it/tools/`, which uses the binaries this package's integration
//! tests make cargo build).

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(bin)
        .args(args)
        .env_remove("DIALPROOF_WEBHOOK_SECRET")
        .output()
        .expect("running the tool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

const LOAD: &str = env!("CARGO_BIN_EXE_dialproof-load");
const RECEIVER: &str = env!("CARGO_BIN_EXE_dialproof-webhook-receiver");

#[test]
fn the_load_tool_refuses_remote_targets_unless_allowed() {
    for target in ["https://198.51.100.7", "https://10.1.2.3:8443"] {
        let (code, text) = run(
            LOAD,
            &[
                "--target",
                target,
                "--insecure",
                "--mix",
                "get=1",
                "--concurrency",
                "1",
            ],
        );
        assert_eq!(code, 2, "{text}");
        assert!(text.contains("not a loopback address"), "{text}");
        assert!(text.contains("--allow-remote"), "{text}");
    }
    let (code, text) = run(
        LOAD,
        &[
            "--insecure",
            "--mix",
            "get=1",
            "--concurrency",
            "1",
            "--calls",
            "--sip",
            "192.0.2.1:5060",
        ],
    );
    assert_eq!(code, 2, "{text}");
    let (code, text) = run(
        LOAD,
        &[
            "--insecure",
            "--mix",
            "get=1",
            "--concurrency",
            "1",
            "--webhook-listen",
            "0.0.0.0:0",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--webhook-listen"), "{text}");
}

#[test]
fn the_load_tool_checks_its_options() {
    for (args, says) in [
        (
            &["--insecure", "--mix", "get=1"][..],
            "exactly one of --rate",
        ),
        (&["--mix", "get=1", "--concurrency", "1"], "--cacert"),
        (
            &["--insecure", "--concurrency", "1"],
            "--keys FILE or --setup-local",
        ),
        (
            &["--insecure", "--mix", "sell=1", "--concurrency", "1"],
            "unknown operation",
        ),
        (&["--insecure", "--mix", "get=1", "--rate", "0"], "--rate"),
    ] {
        let (code, text) = run(LOAD, args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
    }
}

#[test]
fn the_receiver_needs_a_secret_and_a_loopback_address() {
    let (code, text) = run(RECEIVER, &["--listen", "127.0.0.1:0", "--timeout", "1"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("webhook secret"), "{text}");
    let (code, text) = run(
        RECEIVER,
        &[
            "--listen",
            "0.0.0.0:0",
            "--secret",
            "whsec_x",
            "--timeout",
            "1",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("not a loopback address"), "{text}");
    let (code, text) = run(
        RECEIVER,
        &[
            "--listen",
            "127.0.0.1:0",
            "--secret",
            "whsec_x",
            "--timeout",
            "0.2",
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("READY http://127.0.0.1:"), "{text}");
    let (code, _) = run(
        RECEIVER,
        &[
            "--listen",
            "127.0.0.1:0",
            "--secret",
            "whsec_x",
            "--events",
            "1",
            "--timeout",
            "0.2",
        ],
    );
    assert_eq!(code, 1, "fewer events than asked before the timeout");
}

/// README "A first verification" and tools/README.md: every tool explains
/// itself with `--help` (exit 0, usage on stdout), subcommands included.
#[test]
fn every_tool_answers_help() {
    let tools = [
        (env!("CARGO_BIN_EXE_dialproof-sim"), &["--help"][..]),
        (env!("CARGO_BIN_EXE_dialproof-sim"), &["call", "--help"][..]),
        (
            env!("CARGO_BIN_EXE_dialproof-sim"),
            &["registrar", "--help"][..],
        ),
        (LOAD, &["--help"][..]),
        (RECEIVER, &["--help"][..]),
        (
            env!("CARGO_BIN_EXE_dialproof-restart-bench"),
            &["--help"][..],
        ),
        (env!("CARGO_BIN_EXE_dialproof-crash-loop"), &["--help"][..]),
    ];
    for (bin, args) in tools {
        let (code, text) = run(bin, args);
        assert_eq!(code, 0, "{bin} {args:?} exited {code}:\n{text}");
        assert!(
            text.contains("Usage:"),
            "{bin} {args:?} printed no usage:\n{text}"
        );
    }
}

/// README "A first verification": `--to "$DIAL"` with a variable that was
/// never set is refused before anything is sent, not dialled as "".
#[test]
fn the_simulator_refuses_an_empty_number() {
    let (code, text) = run(
        env!("CARGO_BIN_EXE_dialproof-sim"),
        &[
            "call",
            "--to",
            "",
            "--from",
            "+79161234567",
            "--target",
            "127.0.0.1:9",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--to"), "{text}");
    assert!(!text.contains("calling"), "a call was placed:\n{text}");
}
