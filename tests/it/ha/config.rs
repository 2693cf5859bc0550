//! `dialproof check` and `dialproof ha` with an `[ha]` section: the plan
//! names the node, the key and etcd; every bad setting is its own line
//! and exit 1; `ha` without the section says so.
//!
//! Not for: the section's unit rules (`shared::config::ha`'s tests).

use crate::support::BIN;
use std::process::{Command, Output};

fn run(text: &str, command: &str) -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("dialproof.toml"), text).expect("config");
    std::fs::write(dir.path().join("litestream.yml"), "dbs: []\n").expect("litestream config");
    let out = Command::new(BIN)
        .arg("--config")
        .arg(dir.path().join("dialproof.toml"))
        .arg(command)
        .env("DIALPROOF_LOG", "warn")
        .output()
        .expect("running dialproof");
    (dir, out)
}

const HEAD: &str = "[server]\nhttps_listen = \"127.0.0.1:0\"\nworkers = 1\n\n\
                    [storage]\ndata_dir = \"data\"\nreplication = \"litestream\"\n\n";

#[test]
fn check_shows_the_ha_plan_and_names_each_bad_setting() {
    let good = format!(
        "{HEAD}[ha]\nendpoints = [\"http://127.0.0.1:2379\", \"http://127.0.0.1:22379\"]\n\
         cluster = \"prod\"\nnode = \"a\"\nlitestream_config = \"litestream.yml\"\n"
    );
    let (_dir, out) = run(&good, "check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            "ha: node \"a\" of cluster \"prod\", key /dialproof/prod/primary, lease TTL 5 s, \
             etcd http://127.0.0.1:2379 http://127.0.0.1:22379"
        ),
        "{stdout}"
    );

    let bad = "[server]\nhttps_listen = \"127.0.0.1:0\"\nworkers = 1\n\n[storage]\n\
               data_dir = \"data\"\n\n[ha]\nendpoints = [\"etcd:2379\"]\ncluster = \"prod\"\n\
               node = \"a b\"\nlease_ttl_seconds = 90\nlitestream_config = \"missing.yml\"\n";
    let (_dir, out) = run(bad, "check");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "error: ha.endpoints: \"etcd:2379\" is not an http://host:port URL of an etcd member",
            "error: [ha] needs storage.replication = \"litestream\" (a promotion restores the \
             replica and holds numbers from its heartbeat)",
        ],
        "the first bad setting of the section, and the replication it needs"
    );
}

#[test]
fn ha_without_the_section_says_what_is_missing() {
    let (_dir, out) = run(HEAD, "ha");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`dialproof ha` needs an [ha] section"),
        "{stderr}"
    );
}
