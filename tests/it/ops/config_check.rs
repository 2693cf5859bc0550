//! `dialproof check` (tools/deploy/README.md, "Configuration", "Checking a
//! configuration"; README, "Configuration", "Reload and check"):
//! each class of problem with its exact line, one line per problem, exit
//! 1, nothing changed on disk; the plan of a good file; and `serve`
//! refusing the same file with the same lines.

use crate::support::BIN;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary directory holding `dialproof.toml` with `text`.
struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new(text: &str) -> Case {
        let dir = tempfile::Builder::new()
            .prefix("dialproof-check-")
            .tempdir()
            .expect("temp dir");
        std::fs::write(dir.path().join("dialproof.toml"), text).expect("config");
        Case { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, command: &str) -> Output {
        Command::new(BIN)
            .arg("--config")
            .arg(self.path("dialproof.toml"))
            .arg(command)
            .env("NO_COLOR", "1")
            .env("DIALPROOF_LOG", "warn")
            .output()
            .expect("running dialproof")
    }

    /// Runs `check`, expects exit 1 and returns its stderr lines.
    fn problems(&self) -> Vec<String> {
        let out = self.run("check");
        assert_eq!(
            out.status.code(),
            Some(1),
            "check must fail: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(out.stdout.is_empty(), "no plan printed for a refused file");
        lines(&out.stderr)
    }
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A good `[server]` and `[storage]` on loopback, with the data directory
/// inside the case's directory.
const GOOD_HEAD: &str = "[server]\nhttps_listen = \"127.0.0.1:0\"\nworkers = 1\n\n\
                         [storage]\ndata_dir = \"data\"\n";

const LINE_A: &str = "[[lines]]\nname = \"a\"\nmode = \"always_up\"\n\
                      provider_addresses = [\"127.0.0.1\"]\n\
                      numbers = [{ range_start = \"+74950000000\", count = 10, pool = \"domestic\" }]\n";

#[test]
fn a_good_file_prints_what_serve_would_start_and_changes_nothing() {
    let case = Case::new(&format!(
        "[server]\nhttps_listen = \"127.0.0.1:0\"\nops_listen = \"127.0.0.1:0\"\nworkers = 1\n\n\
         [storage]\ndata_dir = \"data\"\n\n[sip]\nlisten = \"127.0.0.1:0\"\n\n{LINE_A}"
    ));
    let out = case.run("check");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = case.path("data");
    let expected = vec![
        format!("configuration {}", case.path("dialproof.toml").display()),
        "sip line \"a\" (always_up): 10 numbers".to_owned(),
        "numbers: 10 domestic, 0 international".to_owned(),
        "server.https_listen: 127.0.0.1:0 (tcp)".to_owned(),
        "server.ops_listen: 127.0.0.1:0 (tcp)".to_owned(),
        "sip.listen: 127.0.0.1:0 (udp)".to_owned(),
        format!(
            "tls: a self-signed certificate, generated on first start in {}",
            data.join("tls").display()
        ),
        format!("storage.data_dir: {} (created on start)", data.display()),
        format!(
            "database {}: new, created at schema version {}",
            data.join("dialproof.db").display(),
            dialproof_storage::schema_version()
        ),
        "configuration OK".to_owned(),
    ];
    assert_eq!(lines(&out.stdout), expected);
    assert!(!data.exists(), "check must not create the data directory");
}

#[test]
fn a_syntax_error_is_one_line_with_its_place() {
    let case = Case::new("[server\nhttps_listen = \"127.0.0.1:0\"\n");
    assert_eq!(
        case.problems(),
        vec![format!(
            "error: parsing config file {}: line 1, column 8: invalid table header expected `.`, `]`",
            case.path("dialproof.toml").display()
        )]
    );
}

#[test]
fn every_bad_setting_gets_its_own_line() {
    let case = Case::new(&format!(
        "[server]\nhttps_listen = \"127.0.0.1:0\"\nworkers = 0\n\n[tls]\ncert = \"c.pem\"\n\n\
         [api]\nidempotency_key_hours = 0\n\n\
         [[lines]]\nname = \"r\"\nmode = \"register\"\nreject_code = 404\n\
         numbers = [{{ number = \"+7\", pool = \"domestic\" }}]\n\n\
         [[lines]]\nname = \"p\"\nmode = \"always_up\"\n\
         numbers = [{{ range_start = \"+99999999\", count = 2, pool = \"domestic\" }}, \
         {{ number = \"+74950000000\", pool = \"national\" }}]\n\n{LINE_A}"
    ));
    assert_eq!(
        case.problems(),
        vec![
            "error: server.workers must be 1..=256, got 0",
            "error: tls.cert and tls.key must be given together",
            "error: api.idempotency_key_hours must be 1..=168, got 0",
            "error: line \"r\": reject_code must be one of [603, 486, 480], got 404",
            "error: line \"r\": \"+7\" is not an E.164 number (+ and 8 to 15 digits)",
            "error: line \"p\": range starting at +99999999 overflows 8 digits",
        ]
    );
}

#[test]
fn overlapping_ranges_are_refused() {
    let case = Case::new(&format!(
        "{GOOD_HEAD}\n{LINE_A}\n[[lines]]\nname = \"b\"\nmode = \"always_up\"\n\
         numbers = [{{ range_start = \"+74950000005\", count = 10, pool = \"domestic\" }}]\n"
    ));
    assert_eq!(
        case.problems(),
        vec!["error: numbers: number +74950000005 is listed twice"]
    );
}

#[test]
fn listen_addresses_must_be_distinct_and_local() {
    // 192.0.2.1 (TEST-NET-1) is on no interface of the test's namespace:
    // only a bind is tried, nothing is sent.
    let case = Case::new(
        "[server]\nhttps_listen = \"127.0.0.1:8443\"\nhttp_listen = \"0.0.0.0:8443\"\n\
         ops_listen = \"192.0.2.1:9100\"\n\n[storage]\ndata_dir = \"data\"\n\n\
         [sip]\nlisten = \"192.0.2.1:5060\"\n",
    );
    assert_eq!(
        case.problems(),
        vec![
            "error: server.http_listen 0.0.0.0:8443 and server.https_listen 127.0.0.1:8443 use the same port",
            "error: server.ops_listen 192.0.2.1:9100: this machine cannot listen on that address: \
             Cannot assign requested address (os error 99)",
            "error: sip.listen 192.0.2.1:5060: this machine cannot listen on that address: \
             Cannot assign requested address (os error 99)",
        ]
    );
}

fn write_pair(dir: &Path, cert: &str, key: &str) {
    let pair = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("rcgen");
    std::fs::write(dir.join(cert), pair.cert.pem()).unwrap();
    std::fs::write(dir.join(key), pair.key_pair.serialize_pem()).unwrap();
}

#[test]
fn certificate_and_key_must_be_readable_and_match() {
    let tls =
        |cert: &str, key: &str| format!("{GOOD_HEAD}\n[tls]\ncert = \"{cert}\"\nkey = \"{key}\"\n");
    let missing = Case::new(&tls("missing.pem", "missing.key"));
    assert_eq!(
        missing.problems(),
        vec![format!(
            "error: tls: reading {}: No such file or directory (os error 2)",
            missing.path("missing.pem").display()
        )]
    );

    let mismatched = Case::new(&tls("a.pem", "b.key"));
    write_pair(mismatched.dir.path(), "a.pem", "a.key");
    write_pair(mismatched.dir.path(), "b.pem", "b.key");
    assert_eq!(
        mismatched.problems(),
        vec![format!(
            "error: tls: the key {} does not match the certificate {}: \
             keys may not be consistent: KeyMismatch",
            mismatched.path("b.key").display(),
            mismatched.path("a.pem").display()
        )]
    );

    let matched = Case::new(&tls("a.pem", "a.key"));
    write_pair(matched.dir.path(), "a.pem", "a.key");
    let out = matched.run("check");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(lines(&out.stdout).contains(&format!(
        "tls: certificate {} with key {}",
        matched.path("a.pem").display(),
        matched.path("a.key").display()
    )));
}

#[test]
fn the_data_directory_must_be_a_writable_directory() {
    let case = Case::new(
        "[server]\nhttps_listen = \"127.0.0.1:0\"\n\n[storage]\ndata_dir = \"file/data\"\n",
    );
    std::fs::write(case.path("file"), "not a directory").unwrap();
    assert_eq!(
        case.problems(),
        vec![format!(
            "error: storage.data_dir {}: {} is not a directory",
            case.path("file/data").display(),
            case.path("file").display()
        )]
    );
}

#[test]
fn a_database_from_a_newer_release_is_refused_by_check_and_serve_alike() {
    let case = Case::new(GOOD_HEAD);
    std::fs::create_dir(case.path("data")).unwrap();
    let db = case.path("data/dialproof.db");
    let newer = dialproof_storage::schema_version() + 1;
    rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();
    let expected = vec![format!(
        "error: database {}: database schema version {newer} is newer than this release knows \
         ({}): it was written by a newer Dialproof; run that release, or restore the backup \
         taken before it",
        db.display(),
        dialproof_storage::schema_version()
    )];
    assert_eq!(case.problems(), expected);

    let serve = case.run("serve");
    assert_eq!(serve.status.code(), Some(1));
    assert!(serve.stdout.is_empty(), "serve must not get to READY");
    assert_eq!(
        lines(&serve.stderr),
        expected,
        "serve refuses with check's lines"
    );
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, newer, "the newer database is left as it was");
}

#[test]
fn serve_refuses_a_bad_file_with_the_lines_check_prints() {
    let case = Case::new(&format!(
        "[server]\nhttps_listen = \"127.0.0.1:0\"\nworkers = 0\n\n[storage]\ndata_dir = \"data\"\n\n\
         {LINE_A}\n[[lines]]\nname = \"b\"\nmode = \"ip_auth\"\n"
    ));
    let check = case.problems();
    assert_eq!(
        check,
        vec![
            "error: server.workers must be 1..=256, got 0",
            "error: line \"b\": mode \"ip_auth\" needs `provider` (host:port)",
        ]
    );
    let serve = case.run("serve");
    assert_eq!(serve.status.code(), Some(1));
    assert_eq!(lines(&serve.stderr), check);
    assert!(
        !case.path("data").exists(),
        "a refused serve creates nothing"
    );
}
