//! The verifications page over HTTPS: a verification completed by a
//! simulated call and the 503 rejections appear with the right totals and
//! success share; filters, keyset pagination and company isolation over
//! rows written straight into the database.
//!
//! Not for: the API's reads (`api::read_cancel`).

use crate::support::dashboard::*;
use crate::support::sip::*;
use crate::support::*;
use serde_json::json;

const PAGE: &str = "/dashboard/verifications/";

/// The table rows of a page, each as its cells' texts.
fn rows(html: &str) -> Vec<Vec<String>> {
    html.split("<tr class=\"row\">")
        .skip(1)
        .map(|tr| {
            let tr = &tr[..tr.find("</tr>").unwrap()];
            tr.split("<td")
                .skip(1)
                .map(|td| {
                    let inner = &td[td.find('>').unwrap() + 1..td.find("</td>").unwrap()];
                    inner.replace("<code>", "").replace("</code>", "")
                })
                .collect()
        })
        .collect()
}

fn total(html: &str, id: &str) -> String {
    let at = html.find(&format!("<b id=\"{id}\">")).expect(id) + id.len() + 9;
    html[at..at + html[at..].find("</b>").unwrap()].to_owned()
}

#[test]
fn a_completed_call_and_the_503_rejections_count_in_the_totals() {
    let server = Server::start(&sip_config(&trusted_line(2, 603)));
    let company = server.create_company("Acme");
    let token = server.create_key(company);
    create_user(&server, company, "ann@acme.test");
    let mut with_ref = body(RU_PHONE);
    with_ref["client_ref"] = json!("order-1");
    let a = server.create_ok(&token, &with_ref);
    server.create_ok(&token, &body("+79123456700"));
    for phone in ["+79123456701", "+79123456702"] {
        assert_eq!(server.create(&token, &body(phone)).status, 503);
    }
    let out = sim_call(&server, a["dial_number"].as_str().unwrap(), "+79161234567");
    assert!(out.status.success(), "{out:?}");

    let dash = Dash::login(&server, "ann@acme.test");
    let page = dash.get(PAGE);
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert_eq!(total(&html, "total"), "4");
    assert_eq!(total(&html, "completed"), "1");
    assert_eq!(total(&html, "share"), "25.0 %");
    assert!(html.contains("<svg") && html.contains("<polyline"), "chart");
    let rows = rows(&html);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let rejected: Vec<_> = rows.iter().filter(|r| r[8] == "all lines busy").collect();
    assert_eq!(rejected.len(), 2);
    for r in &rejected {
        assert_eq!((r[0].as_str(), r[2].as_str()), ("failed", "—"), "{r:?}");
    }
    let done = rows
        .iter()
        .find(|r| r[0] == "completed")
        .expect("completed row");
    assert_eq!(done[1], RU_PHONE);
    assert_eq!(done[2], a["dial_number"].as_str().unwrap());
    assert_eq!(done[3], "order-1");
    assert_eq!(done[7], "+79161234567");
    assert_ne!(done[5], "—", "completed time");

    // Filters: status, then client_ref (rejections have none).
    let failed = rows_of(&dash, "?status=failed");
    assert_eq!(failed.len(), 2);
    let by_ref = rows_of(&dash, "?client_ref=order-1");
    assert_eq!(by_ref.len(), 1);
    assert_eq!(by_ref[0][0], "completed");
    let by_phone = rows_of(&dash, "?phone=%2B79123456701");
    assert_eq!(by_phone.len(), 1);
    assert_eq!(by_phone[0][8], "all lines busy");
}

fn rows_of(dash: &Dash<'_>, query: &str) -> Vec<Vec<String>> {
    let r = dash.get(&format!("{PAGE}{query}"));
    assert_eq!(r.status, 200, "{query}: {}", r.text());
    rows(&r.text())
}

/// Writes `n` verifications (every third completed, the rest expired) and
/// `rejections` rejection rows for `company`, one second apart, ending now.
fn fill(server: &Server, company: i64, key_id: i64, n: usize, rejections: usize) {
    let db = rusqlite::Connection::open(server.data_dir.join("dialproof.db")).expect("db");
    let now = now_millis();
    for i in 0..n {
        let at = now - (i as i64) * 1000;
        let status = if i % 3 == 0 { "completed" } else { "expired" };
        db.execute(
            "INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number, pool, \
             client_ref, webhook_url, ttl_seconds, status, created_at, expires_at, completed_at, \
             caller_id, lease_generation) VALUES (?1, ?2, ?3, ?4, '+74950000000', 'domestic', \
             ?5, 'https://93.184.216.34/h', 60, ?6, ?7, ?8, ?9, '', 0)",
            rusqlite::params![
                format!("ver_{company:02}{i:024}"),
                company,
                key_id,
                format!("+7912{:07}", i % 10),
                format!("ref-{i}"),
                status,
                at,
                at + 60_000,
                (status == "completed").then_some(at + 500),
            ],
        )
        .expect("insert verification");
    }
    for i in 0..rejections {
        db.execute(
            "INSERT INTO rejections (company_id, api_key_id, phone, pool, reason, created_at) \
             VALUES (?1, ?2, '+79990000000', 'domestic', 'all lines busy', ?3)",
            rusqlite::params![company, key_id, now - (i as i64) * 1500 - 1],
        )
        .expect("insert rejection");
    }
}

fn key_id(server: &Server, company: i64) -> i64 {
    server.create_key(company);
    let keys = server.cli(&["key", "list", "--company", &company.to_string()]);
    keys[0]["id"].as_i64().expect("key id")
}

#[test]
fn pages_follow_the_cursor_without_gaps_and_filters_narrow_them() {
    let server = Server::with_pools(1, 0);
    let acme = server.create_company("Acme");
    let other = server.create_company("Other");
    create_user(&server, acme, "ann@acme.test");
    let (acme_key, other_key) = (key_id(&server, acme), key_id(&server, other));
    fill(&server, acme, acme_key, 120, 10);
    fill(&server, other, other_key, 30, 5);
    let dash = Dash::login(&server, "ann@acme.test");

    let first = dash.get(PAGE).text();
    assert_eq!(total(&first, "total"), "130");
    assert_eq!(total(&first, "completed"), "40");
    assert_eq!(total(&first, "share"), "30.8 %");
    let mut seen = Vec::new();
    let mut html = first;
    loop {
        let page = rows(&html);
        assert!(page.len() <= 50);
        seen.extend(page.iter().map(|r| format!("{}|{}|{}", r[9], r[4], r[8])));
        let Some(at) = html.find("id=\"older\" href=\"") else {
            break;
        };
        let href = &html[at + 17..];
        let href = href[..href.find('"').unwrap()]
            .replace("&amp;", "&")
            .replace("&#38;", "&");
        let r = dash.get(&href);
        assert_eq!(r.status, 200, "{href}");
        html = r.text();
    }
    assert_eq!(seen.len(), 130, "every row once");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 130, "no row twice");
    // Newest first: the first row is the newest verification.
    assert!(
        seen[0].starts_with(&format!("ver_{acme:02}{:024}", 0)),
        "{}",
        seen[0]
    );
    assert!(
        seen.iter()
            .all(|s| !s.starts_with(&format!("ver_{other:02}"))),
        "other company's rows"
    );

    let completed = rows_of(&dash, "?status=completed");
    assert_eq!(completed.len(), 40);
    assert!(completed.iter().all(|r| r[0] == "completed"));
    assert_eq!(rows_of(&dash, "?phone=%2B79120000003").len(), 12);
    assert_eq!(rows_of(&dash, "?client_ref=ref-7").len(), 1);
    assert_eq!(rows_of(&dash, "?status=failed").len(), 10);
    // A period before the rows: nothing, and zero totals.
    let empty = dash
        .get(&format!("{PAGE}?from=2020-01-01&to=2020-01-31"))
        .text();
    assert_eq!(rows(&empty).len(), 0);
    assert_eq!(total(&empty, "total"), "0");
    for bad in [
        "?status=done",
        "?from=2026-02-30",
        "?after=x",
        "?from=2026-01-02&to=2026-01-01",
    ] {
        let r = dash.get(&format!("{PAGE}{bad}"));
        assert_eq!(r.status, 400, "{bad}");
        assert!(r.text().contains("class=\"error\""), "{bad}");
    }
}

/// Support people see which `Idempotency-Key` a verification was created
/// with (a client's retries name it), and none for one created without.
#[test]
fn the_list_shows_the_idempotency_key_a_verification_was_created_with() {
    let server = Server::with_pools(2, 0);
    let company = server.create_company("Acme");
    let token = server.create_key(company);
    create_user(&server, company, "ann@acme.test");
    let auth = format!("Bearer {token}");
    let keyed = server.request(
        "POST",
        COLLECTION,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Idempotency-Key", "signup-4711"),
        ],
        body(RU_PHONE).to_string().as_bytes(),
    );
    assert_eq!(keyed.status, 201, "{}", keyed.text());
    let keyed_id = keyed.json()["verification_id"].as_str().unwrap().to_owned();
    let plain = server.create_ok(&token, &body("+79123456700"));
    let dash = Dash::login(&server, "ann@acme.test");
    let page = dash.get(PAGE);
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(html.contains("<th>Idempotency-Key</th>"), "no key column");
    let table = rows(&html);
    let row_of = |id: &str| {
        table
            .iter()
            .find(|r| r.iter().any(|c| c == id))
            .unwrap_or_else(|| panic!("{id} not listed: {table:?}"))
            .clone()
    };
    assert_eq!(row_of(&keyed_id).last().unwrap(), "signup-4711");
    assert_eq!(
        row_of(plain["verification_id"].as_str().unwrap())
            .last()
            .unwrap(),
        ""
    );
}
