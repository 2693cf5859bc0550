//! A 503 is an acknowledged rejection: it is answered only after its
//! rejection row is committed. With the writer's next operation failing
//! (the `writer.op` fail point) the create that finds no number gets DRF's
//! 500 and no row; the next one gets the 503 and its row is there. Before
//! this, the row was written after the answer, fire-and-forget, and a kill
//! could lose answered rejections (`tests/crash_loop.rs` found 2 of 3 348).

mod common;

use common::*;
use serde_json::json;

/// `src/api/texts.rs` `SERVER_ERROR` (DRF's text).
const SERVER_ERROR: &str = "Произошла ошибка сервера.";

fn rejection_rows(s: &Server) -> i64 {
    rusqlite::Connection::open(s.data_dir.join("dialproof.db"))
        .expect("opening the db")
        .query_row("SELECT count(*) FROM rejections", [], |r| r.get(0))
        .expect("counting rejections")
}

#[test]
fn a_503_waits_for_its_rejection_row_and_is_a_500_without_it() {
    // International numbers only: a Russian phone finds no number at once.
    let mut s = Server::prepare(&pools(0, 1));
    let token = s.new_client("acme");
    s.set_env("DIALPROOF_FAILPOINTS", "writer.op=1*error");
    s.launch();

    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 500, "{}", r.text());
    assert_eq!(r.json(), json!({ "detail": SERVER_ERROR }));
    assert_eq!(rejection_rows(&s), 0);

    let r = s.create(&token, &body(RU_PHONE));
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("60"));
    assert_eq!(r.json()["error"], "no_dial_number_available");
    // Committed before the answer: there now, not eventually.
    assert_eq!(rejection_rows(&s), 1);
}
