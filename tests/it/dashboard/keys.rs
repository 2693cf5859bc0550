//! The keys page over HTTPS: a key created in the dashboard (token shown
//! once) works on the API, a revoked one gets 401 at once, a deleted one
//! leaves the list; creation is limited to 10 per hour per user (DRF 429
//! with Retry-After); one company never sees or touches another's keys.
//!
//! Not for: keys made by the operator CLI (`ops::cli`, `api::auth`).

use crate::support::dashboard::*;
use crate::support::*;

const INVALID_KEY: &str = "Недействительный API-ключ.";

#[test]
fn a_created_key_works_until_revoked_and_a_deleted_key_leaves_the_list() {
    let server = Server::with_pools(3, 0);
    let company = server.create_company("Acme");
    create_user(&server, company, "ann@acme.test");
    let dash = Dash::login(&server, "ann@acme.test");

    let created = dash.create_key("backend <prod>");
    assert_eq!(created.status, 201, "{}", created.text());
    let token = shown_token(&created);
    let html = created.text();
    assert!(
        html.contains("backend ") && !html.contains("<prod>"),
        "label not escaped"
    );
    assert!(created.text().contains("только один раз"));
    assert!(created.text().contains("id=\"copy\""), "copy button");
    let prefix = token["svc_live_".len().."svc_live_".len() + 8].to_owned();

    assert_eq!(server.create(&token, &body(RU_PHONE)).status, 201);
    let list = dash.get("/dashboard/keys/").text();
    assert!(list.contains(&format!("<code>{prefix}</code>")), "{list}");
    assert!(!list.contains(&token), "the full token is shown only once");
    assert!(list.contains("активен"));
    // Its last use appears within a minute (`api::key_last_use`).

    let csrf = dash.csrf();
    let r = dash.post(
        "/dashboard/keys/revoke/",
        &[("csrf", &csrf), ("prefix", &prefix)],
    );
    assert_eq!(r.status, 303, "{}", r.text());
    // Refused at once, not after the cache's next poll.
    let refused = server.create(&token, &body(RU_PHONE));
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(refused.detail(), INVALID_KEY);
    assert!(dash.get("/dashboard/keys/").text().contains("отозван"));

    let second = shown_token(&dash.create_key("second"));
    let r = dash.post(
        "/dashboard/keys/delete/",
        &[("csrf", &csrf), ("prefix", &prefix)],
    );
    assert_eq!(r.status, 303);
    let list = dash.get("/dashboard/keys/").text();
    assert!(!list.contains(&prefix), "deleted key still listed");
    assert!(list.contains(&second[9..17]));
    assert_eq!(server.create(&second, &body(RU_PHONE)).status, 201);
    // Deleting again: not found, nothing changes.
    let again = dash.post(
        "/dashboard/keys/delete/",
        &[("csrf", &csrf), ("prefix", &prefix)],
    );
    assert_eq!(again.status, 404);
    // A blank label is refused with the form shown again.
    let blank = dash.create_key("   ");
    assert_eq!(blank.status, 400);
    assert!(blank.text().contains("Название ключа"));
}

#[test]
fn key_creation_is_limited_to_ten_per_hour_per_user() {
    let server = Server::with_pools(1, 0);
    let company = server.create_company("Acme");
    create_user(&server, company, "ann@acme.test");
    create_user(&server, company, "bea@acme.test");
    let ann = Dash::login(&server, "ann@acme.test");
    for i in 0..10 {
        let r = ann.create_key(&format!("k{i}"));
        assert_eq!(r.status, 201, "creation {i}: {}", r.text());
    }
    let r = ann.create_key("eleventh");
    assert_eq!(r.status, 429, "{}", r.text());
    let wait: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((3590..=3600).contains(&wait), "{wait}");
    assert_eq!(r.detail(), throttled(wait));
    assert_json_type(&r);
    // Counted per user: a colleague still creates.
    let bea = Dash::login(&server, "bea@acme.test");
    assert_eq!(bea.create_key("bea's").status, 201);
    let keys = server.cli(&["key", "list"]);
    assert_eq!(keys.as_array().unwrap().len(), 11);
}

#[test]
fn one_company_never_sees_or_changes_anothers_keys() {
    let server = Server::with_pools(2, 0);
    let acme = server.create_company("Acme");
    let other = server.create_company("Other");
    create_user(&server, acme, "ann@acme.test");
    create_user(&server, other, "bob@other.test");
    let acme_token = server.create_key(acme);
    let acme_prefix = &acme_token[9..17];
    let bob = Dash::login(&server, "bob@other.test");
    let bobs_token = shown_token(&bob.create_key("bob's"));

    let list = bob.get("/dashboard/keys/").text();
    assert!(!list.contains(acme_prefix));
    assert!(list.contains(&bobs_token[9..17]));
    let csrf = bob.csrf();
    for action in ["/dashboard/keys/revoke/", "/dashboard/keys/delete/"] {
        let r = bob.post(action, &[("csrf", &csrf), ("prefix", acme_prefix)]);
        assert_eq!(r.status, 404, "{action}");
    }
    assert_eq!(server.create(&acme_token, &body(RU_PHONE)).status, 201);
    let ann = Dash::login(&server, "ann@acme.test");
    let list = ann.get("/dashboard/keys/").text();
    assert!(list.contains(acme_prefix) && !list.contains(&bobs_token[9..17]));
}
