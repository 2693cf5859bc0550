//! Operator changes through `Admin`, and how the running store sees them.
//!
//! Not for: the operator CLI over the binary (the root package's
//! `tests/it/ops`).

use crate::support::*;
use dialproof_storage::{Admin, StorageError};

#[test]
fn every_change_bumps_change_version_once_and_no_ops_do_not() {
    let db = db();
    let admin = db.admin();
    let mut version = admin.change_version().expect("version");
    let mut expect_bump = |admin: &Admin, bumped: bool| {
        let now = admin.change_version().expect("version");
        assert_eq!(now, version + i64::from(bumped));
        version = now;
    };

    let c = admin
        .create_company("Globex", "whsec_g", T0)
        .expect("company");
    expect_bump(&admin, true);
    let key = admin
        .create_key(c.id, "ci", "glbx0001", "h", T0)
        .expect("key");
    expect_bump(&admin, true);
    assert_eq!(key.company_id, c.id);
    assert_eq!(
        (key.revoked_at, key.last_used_at, key.rate_limit_per_minute),
        (None, None, None)
    );

    assert!(admin.set_key_limit("glbx0001", Some(120)).expect("limit"));
    expect_bump(&admin, true);
    assert!(!admin.set_key_limit("nope0000", Some(1)).expect("limit"));
    expect_bump(&admin, false);

    assert!(admin
        .revoke_key("glbx0001", T0.plus_seconds(1))
        .expect("revoke"));
    expect_bump(&admin, true);
    assert!(!admin
        .revoke_key("glbx0001", T0.plus_seconds(2))
        .expect("revoke again"));
    assert!(!admin.revoke_key("nope0000", T0).expect("revoke unknown"));
    expect_bump(&admin, false);

    assert!(admin
        .dedicate_number("+74950000001", c.id, T0)
        .expect("dedicate"));
    expect_bump(&admin, true);
    assert!(!admin
        .dedicate_number("+74950000001", c.id, T0)
        .expect("again"));
    expect_bump(&admin, false);
    assert!(admin.undedicate_number("+74950000001").expect("undedicate"));
    expect_bump(&admin, true);
    assert!(!admin
        .undedicate_number("+74950000001")
        .expect("undedicate again"));
    expect_bump(&admin, false);

    admin
        .set_send_failed_webhooks(c.id, true)
        .expect("failed hooks");
    expect_bump(&admin, true);
    admin
        .rotate_webhook_secret(c.id, "whsec_g2", T0.plus_seconds(86_400))
        .expect("rotate");
    expect_bump(&admin, true);
    admin
        .set_dev_webhook_urls(c.id, vec!["http://localhost:9000/hook".into()])
        .expect("dev urls");
    expect_bump(&admin, true);

    // Failed changes leave the version alone.
    assert!(admin.create_key(c.id, "dup", "glbx0001", "h", T0).is_err());
    assert!(admin.set_send_failed_webhooks(999, true).is_err());
    expect_bump(&admin, false);
}

#[test]
fn keys_companies_and_numbers_round_trip() {
    let db = db();
    let admin = db.admin();
    let c = admin
        .create_company("Globex", "whsec_g", T0)
        .expect("company");
    assert_eq!(admin.company(c.id).expect("get"), Some(c.clone()));
    assert_eq!(admin.company(999).expect("get"), None);
    assert!(!c.send_failed_webhooks && c.dev_webhook_urls.is_empty());
    assert_eq!(admin.list_companies().expect("list").len(), 3);

    let k = admin
        .create_key(c.id, "ci", "glbx0001", "hash", T0)
        .expect("key");
    assert!(matches!(
        admin.create_key(c.id, "dup", "glbx0001", "h", T0),
        Err(StorageError::Conflict(m)) if m.contains("glbx0001")
    ));
    assert!(matches!(
        admin.create_key(999, "x", "zzzz0001", "h", T0),
        Err(StorageError::NotFound(m)) if m.contains("999")
    ));
    assert_eq!(admin.list_keys(Some(c.id)).expect("keys"), vec![k.clone()]);
    assert_eq!(admin.list_keys(None).expect("keys").len(), 3);
    admin.set_key_limit("glbx0001", Some(30)).expect("limit");
    admin
        .revoke_key("glbx0001", T0.plus_seconds(5))
        .expect("revoke");
    let k2 = admin.list_keys(Some(c.id)).expect("keys").remove(0);
    assert_eq!(k2.rate_limit_per_minute, Some(30));
    assert_eq!(k2.revoked_at, Some(T0.plus_seconds(5)));
    admin.set_key_limit("glbx0001", None).expect("clear");
    assert_eq!(
        admin.list_keys(Some(c.id)).expect("keys")[0].rate_limit_per_minute,
        None
    );

    admin
        .dedicate_number("+74950000001", c.id, T0)
        .expect("dedicate");
    assert!(matches!(
        admin.dedicate_number("+74950000001", db.company, T0),
        Err(StorageError::Conflict(_))
    ));
    assert!(matches!(
        admin.dedicate_number("+74950000002", 999, T0),
        Err(StorageError::NotFound(_))
    ));
    assert_eq!(
        admin.list_dedicated_numbers().expect("numbers"),
        vec![("+74950000001".to_owned(), c.id)]
    );

    let rotated = admin
        .rotate_webhook_secret(c.id, "whsec_new", T0.plus_seconds(60))
        .expect("rotate");
    assert_eq!(rotated.webhook_secret, "whsec_new");
    assert_eq!(rotated.previous_webhook_secret.as_deref(), Some("whsec_g"));
    assert_eq!(
        rotated.previous_secret_valid_until,
        Some(T0.plus_seconds(60))
    );
    assert!(matches!(
        admin.rotate_webhook_secret(999, "x", T0),
        Err(StorageError::NotFound(_))
    ));

    admin
        .set_dev_webhook_urls(
            c.id,
            vec![
                "http://a.test/h".into(),
                "  ".into(),
                " http://b.test/h ".into(),
            ],
        )
        .expect("urls");
    let got = admin.company(c.id).expect("get").expect("company");
    assert_eq!(
        got.dev_webhook_urls,
        vec!["http://a.test/h", "http://b.test/h"]
    );
    assert!(matches!(
        admin.set_dev_webhook_urls(c.id, vec!["http://a\nb".into()]),
        Err(StorageError::Invalid(_))
    ));
    admin.set_dev_webhook_urls(c.id, vec![]).expect("clear");
    assert!(admin
        .company(c.id)
        .expect("get")
        .expect("c")
        .dev_webhook_urls
        .is_empty());
    assert!(matches!(
        admin.create_company(" ", "s", T0),
        Err(StorageError::Invalid(_))
    ));
}

#[test]
fn the_running_store_sees_admin_changes() {
    let db = db();
    let store = db.store();
    let before = read(&store, |r| r.change_version())
        .expect("read")
        .expect("version");
    // The operator CLI: another connection (in production, another process).
    let admin = db.admin();
    let c = admin
        .create_company("Initech", "whsec_i", T0)
        .expect("company");
    admin
        .create_key(c.id, "k", "init0001", "h", T0)
        .expect("key");
    admin
        .dedicate_number("+15550000001", c.id, T0)
        .expect("dedicate");
    admin.set_send_failed_webhooks(c.id, true).expect("flag");
    let after = read(&store, |r| r.change_version())
        .expect("read")
        .expect("version");
    assert_eq!(after, before + 4);
    let (companies, keys, numbers) = read(&store, |r| {
        (
            r.load_companies().expect("companies"),
            r.load_keys().expect("keys"),
            r.load_dedicated_numbers().expect("numbers"),
        )
    })
    .expect("read");
    let initech = companies.iter().find(|x| x.id == c.id).expect("company");
    assert!(initech.send_failed_webhooks);
    assert!(keys
        .iter()
        .any(|k| k.prefix == "init0001" && k.company_id == c.id));
    assert_eq!(numbers, vec![("+15550000001".to_owned(), c.id)]);
    // The store keeps writing while the admin connection is open.
    insert(&store, db.row(1)).expect("insert");
    store.shutdown();
}
