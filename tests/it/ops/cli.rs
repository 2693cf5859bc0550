//! `--json` output of the operator commands, as the README promises it:
//! the whole of standard output is one JSON value, an array of objects for
//! the `list` commands and an object for every other command.
//!
//! Not for: what the commands change (the feature modules that use them).

use crate::support::*;
use serde_json::Value;

fn whole_stdout(server: &Server, args: &[&str]) -> Value {
    let out = server.cli_output(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!("{args:?} printed more or less than one JSON value ({e}): {text}")
    })
}

/// README, "Operations" (Operator commands): with `--json` the whole of standard output
/// is one JSON value, an array of objects for the `list` commands and an
/// object for every other command.
#[test]
fn list_commands_print_one_array_and_others_one_object() {
    let server = Server::prepare(&pools(2, 0));
    let empty = whole_stdout(&server, &["company", "list"]);
    assert_eq!(empty, Value::Array(vec![]));
    let created = whole_stdout(&server, &["company", "create", "--name", "Acme"]);
    assert!(created.is_object(), "{created}");
    let id = created["id"].as_i64().expect("id").to_string();
    let key = whole_stdout(
        &server,
        &["key", "create", "--company", &id, "--label", "ci"],
    );
    assert!(key.is_object(), "{key}");
    for list in [
        &["company", "list"][..],
        &["key", "list"],
        &["number", "list"],
        &["delivery", "list"],
    ] {
        let v = whole_stdout(&server, list);
        let rows = v.as_array().unwrap_or_else(|| panic!("{list:?}: {v}"));
        assert!(rows.iter().all(Value::is_object), "{list:?}: {v}");
        if list[0] != "delivery" {
            assert!(!rows.is_empty(), "{list:?}: {v}");
        }
    }
}

#[test]
fn development_urls_are_added_removed_and_listed_one_at_a_time() {
    let server = Server::prepare(&pools(1, 0));
    let id = server.create_company("Acme").to_string();
    let urls = |v: Value| v["dev_webhook_urls"].clone();
    let list = || urls(server.cli(&["company", "dev-url", "list", &id]));
    assert_eq!(list(), serde_json::json!([]));
    let a = "http://127.0.0.1:9000/";
    let b = "http://127.0.0.1:9001/";
    server.cli(&["company", "dev-url", "add", &id, a]);
    // Adding again changes nothing.
    server.cli(&["company", "dev-url", "add", &id, a]);
    let after = urls(server.cli(&["company", "dev-url", "add", &id, b]));
    assert_eq!(after, serde_json::json!([a, b]));
    assert_eq!(list(), serde_json::json!([a, b]));
    let after = urls(server.cli(&["company", "dev-url", "remove", &id, a]));
    assert_eq!(after, serde_json::json!([b]));
    // Removing what is not there, or adding a non-http URL, is an error
    // that changes nothing.
    for bad in [
        &["company", "dev-url", "remove", &id, a][..],
        &["company", "dev-url", "add", &id, "ftp://127.0.0.1/"],
        &["company", "dev-urls", &id],
    ] {
        let out = server.cli_output(bad);
        assert!(!out.status.success(), "{bad:?} succeeded");
    }
    assert_eq!(list(), serde_json::json!([b]));
    server.cli(&["company", "dev-urls", &id, "--clear"]);
    assert_eq!(list(), serde_json::json!([]));
}
