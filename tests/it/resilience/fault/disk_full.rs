//! A full disk under the real binary: its data directory is a small tmpfs
//! (mounted in a mount namespace of the test's own, so nothing outside
//! sees it), filled by the test until writes fail. Every request then
//! answers with a clear status (a create with DRF's 500 body, never a 201
//! that is not stored), nothing is half-written, the service does not die,
//! and once space returns it creates again without a restart.
//!
//! Needs root (CAP_SYS_ADMIN) and util-linux `unshare` and `mount`, as CI
//! has; where they are missing the test fails and says so.
//!
//! Not for: a writer made to fail by its fail points (`super::storage`).

use crate::support::netns::Netns;
use crate::support::*;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const TEST: &str = concat!(
    module_path!(),
    "::",
    "a_full_disk_fails_writes_cleanly_and_the_service_recovers"
);
/// The tmpfs size: room for the database, its WAL and the certificate.
const DISK: &str = "size=6m";

/// Writes a file of zeros until the filesystem is full.
fn fill(dir: &Path) {
    let mut f = std::fs::File::create(dir.join("filler")).expect("creating the filler");
    let block = vec![0u8; 64 * 1024];
    loop {
        if f.write_all(&block).is_err() {
            break;
        }
    }
    // Whatever is left in smaller pieces too.
    let small = [0u8; 512];
    while f.write_all(&small).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn a_full_disk_fails_writes_cleanly_and_the_service_recovers() {
    let Some(_ns) = Netns::enter(TEST, "127.0.0.1 localhost\n") else {
        return;
    };
    let mut s = Server::prepare(&pools(3, 0));
    std::fs::create_dir_all(&s.data_dir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", DISK, "tmpfs"])
        .arg(&s.data_dir)
        .status()
        .expect("running mount");
    assert!(mounted.success(), "mount -t tmpfs failed: {mounted}");
    // Only ever fill the small tmpfs, never the disk under it.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let dir = s.data_dir.to_str().unwrap();
    assert!(
        mounts
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(dir) && l.contains(" - tmpfs ")),
        "{dir} is not the test's tmpfs:\n{mounts}"
    );
    s.launch();
    let token = s.new_client("acme");
    let mut acknowledged: Vec<Value> = Vec::new();
    acknowledged.push(s.create_ok(&token, &body(RU_PHONE)));

    fill(&s.data_dir);
    // SQLite may still have room in pages it holds (the WAL is reused after
    // a checkpoint), so keep writing until the disk says no; each 201 is
    // cancelled so the three numbers never run out.
    let mut failed = None;
    for i in 0..3000 {
        let r = s.create(&token, &body(RU_PHONE));
        match r.status {
            201 => {
                let v = r.json();
                let id = v["verification_id"].as_str().unwrap().to_owned();
                acknowledged.push(v);
                let c = s.cancel(&token, &id);
                assert!(matches!(c.status, 200 | 500), "{}", c.text());
            }
            500 => {
                failed = Some((i, r));
                break;
            }
            other => panic!("create on a full disk: {other} {}", r.text()),
        }
    }
    let (after, r) = failed.expect("no write failed on a full disk");
    eprintln!("the disk said no after {after} creates");
    assert_json_type(&r);
    assert_eq!(r.json(), json!({ "detail": SERVER_ERROR }));
    // A few more: all clean failures, none a 201 that was not stored.
    for _ in 0..5 {
        let r = s.create(&token, &body(RU_PHONE));
        assert!(matches!(r.status, 500 | 201), "{} {}", r.status, r.text());
        if r.status == 201 {
            acknowledged.push(r.json());
        }
    }
    assert!(s.is_running(), "the service died on a full disk");

    // Space returns: the service creates again, without a restart.
    std::fs::remove_file(s.data_dir.join("filler")).expect("removing the filler");
    let back = poll(Duration::from_secs(20), || {
        let r = s.create(&token, &body(KZ_PHONE));
        (r.status == 201).then(|| r.json())
    })
    .expect("no 201 within 20 s of space returning");
    acknowledged.push(back);
    // Every 201 reads back as it was created.
    for v in &acknowledged {
        let id = v["verification_id"].as_str().unwrap();
        let g = s.get(&token, id);
        assert_eq!(g.status, 200, "{id}: {}", g.text());
        assert_eq!(g.json()["dial_number"], v["dial_number"]);
        assert_eq!(g.json()["created_at"], v["created_at"]);
    }
    // And across a restart (the database is intact on the full-then-freed disk).
    s.restart();
    for v in &acknowledged {
        let g = s.get(&token, v["verification_id"].as_str().unwrap());
        assert_eq!(g.status, 200, "{}", g.text());
    }
    let logs = s.logs();
    assert!(!logs.contains("panicked"), "{logs}");
    // The failure was the disk's (SQLite's SQLITE_FULL), not another one.
    assert!(logs.contains("database or disk is full"), "{logs}");
    s.stop();
    let _ = Command::new("umount").arg(&s.data_dir).status();
}
