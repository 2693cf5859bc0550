//! The verifications page: the company's verifications and 503 rejections
//! for a period, newest first, with filters (status, period, phone,
//! client_ref), keyset pagination ("older" link), the period's totals and
//! success share (completed over all rows, rejections included, as the
//! spec counts them) and a chart of both over time.
//!
//! The page shows one mode at a time (`mode=live`, the default, or
//! `mode=test`: test mode's verifications and rejections): the list and
//! the totals never mix them.
//!
//! A rejection shows as status `failed`, reason 'all lines busy' and no
//! dial number.
//!
//! Not for: the SQL (`dialproof_storage`'s `verification_list`) or drawing
//! (`chart`).

use super::auth;
use super::form::Fields;
use super::page::{self, when, when_opt, Nav};
use super::{chart, Dashboard};
use crate::http::{Request, Response};
use askama::Template;
use dialproof_engine::time::{date_of, parse_date, UnixMillis};
use dialproof_engine::verification::Status;
use dialproof_storage::{ListCursor, ListFilter, ListPage, ListedRow, Totals};

/// Rows per page.
pub const PAGE_ROWS: usize = 50;
/// The default period: today and the days before it.
const DEFAULT_DAYS: i64 = 7;
/// The longest period one page covers.
const PERIOD_DAYS_MAX: i64 = 366;
const DAY_MS: i64 = 86_400_000;
/// The chart has at most about this many buckets.
const BUCKETS_MAX: i64 = 62;
/// Longest phone or client_ref filter (the API's own field limits).
const FILTER_CHARS_MAX: usize = 255;

/// The form's values as given, for showing them back.
#[derive(Default)]
struct Shown {
    /// `live` or `test`.
    mode: String,
    status: String,
    from: String,
    to: String,
    phone: String,
    client_ref: String,
}

struct RowView {
    id: String,
    status: &'static str,
    phone: String,
    dial_number: String,
    client_ref: String,
    created: String,
    completed: String,
    expires: String,
    caller_id: String,
    /// `caller_id_trust (caller_id_source)`, empty until completed.
    evidence: String,
    reason: String,
    idempotency_key: String,
}

#[derive(Template)]
#[template(path = "verifications.html", config = "src/dashboard/askama.toml")]
struct VerificationsPage {
    nav: Nav,
    shown: Shown,
    error: Option<String>,
    rows: Vec<RowView>,
    older: Option<String>,
    total_all: u64,
    total_completed: u64,
    share: String,
    chart: String,
}

fn row_view(r: &ListedRow) -> RowView {
    RowView {
        id: r.verification_id.clone().unwrap_or_else(|| "—".into()),
        status: r.status.as_str(),
        phone: r.phone.clone(),
        dial_number: r.dial_number.clone().unwrap_or_else(|| "—".into()),
        client_ref: r.client_ref.clone(),
        created: when(r.created_at),
        completed: when_opt(r.completed_at),
        expires: when_opt(r.expires_at),
        caller_id: r.caller_id.clone(),
        evidence: r
            .caller_evidence
            .map(|e| format!("{} ({})", e.trust.as_str(), e.source.as_str()))
            .unwrap_or_default(),
        reason: r.reason.clone().unwrap_or_default(),
        idempotency_key: r.idempotency_key.clone().unwrap_or_default(),
    }
}

/// The filter the query string asks for, or the text of what is wrong.
fn parse_filter(
    q: &Fields,
    company_id: i64,
    now: UnixMillis,
) -> Result<(ListFilter, Shown), String> {
    let today = UnixMillis(now.0.div_euclid(DAY_MS) * DAY_MS);
    let date = |name: &str, default: UnixMillis| -> Result<UnixMillis, String> {
        match q.get(name) {
            None => Ok(default),
            Some(s) => parse_date(s).ok_or_else(|| format!("Дата «{s}»: ожидается ГГГГ-ММ-ДД.")),
        }
    };
    let to_day = date("to", today)?;
    let from = date("from", UnixMillis(to_day.0 - (DEFAULT_DAYS - 1) * DAY_MS))?;
    let to = UnixMillis(to_day.0 + DAY_MS);
    if from >= to || to.0 - from.0 > PERIOD_DAYS_MAX * DAY_MS {
        return Err(format!(
            "Период: начало не позже конца и не длиннее {PERIOD_DAYS_MAX} дней."
        ));
    }
    let status = match q.get("status") {
        None => None,
        Some(s) => Some(Status::parse(s).ok_or_else(|| format!("Неизвестный статус «{s}»."))?),
    };
    let text = |name: &str| -> Result<Option<String>, String> {
        match q.get(name) {
            Some(s) if s.chars().count() > FILTER_CHARS_MAX => {
                Err(format!("Фильтр длиннее {FILTER_CHARS_MAX} символов."))
            }
            other => Ok(other.map(str::to_owned)),
        }
    };
    let livemode = match q.get("mode") {
        None | Some("live") => true,
        Some("test") => false,
        Some(other) => return Err(format!("Неизвестный режим «{other}»: live или test.")),
    };
    let after = match q.get("after") {
        None => None,
        Some(s) => Some(parse_cursor(s).ok_or("Неверная ссылка на страницу.")?),
    };
    let shown = Shown {
        mode: if livemode { "live" } else { "test" }.to_owned(),
        status: status.map(|s| s.as_str().to_owned()).unwrap_or_default(),
        from: date_of(from),
        to: date_of(to_day),
        phone: q.get("phone").unwrap_or("").to_owned(),
        client_ref: q.get("client_ref").unwrap_or("").to_owned(),
    };
    let filter = ListFilter {
        company_id,
        livemode,
        from,
        to,
        status,
        phone: text("phone")?,
        client_ref: text("client_ref")?,
        after,
        limit: PAGE_ROWS,
    };
    Ok((filter, shown))
}

/// `"<created_at millis>.<sort_id>"`, as the "older" link writes it.
fn parse_cursor(s: &str) -> Option<ListCursor> {
    let (at, id) = s.split_once('.')?;
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then(|| {
        at.parse().ok().map(|at| ListCursor {
            created_at: UnixMillis(at),
            sort_id: id.to_owned(),
        })
    })?
}

fn older_link(shown: &Shown, next: &ListCursor) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [
        ("mode", &shown.mode),
        ("status", &shown.status),
        ("from", &shown.from),
        ("to", &shown.to),
        ("phone", &shown.phone),
        ("client_ref", &shown.client_ref),
    ] {
        if !v.is_empty() {
            q.append_pair(k, v);
        }
    }
    q.append_pair("after", &format!("{}.{}", next.created_at.0, next.sort_id));
    format!("/dashboard/verifications/?{}", q.finish())
}

/// The chart's bucket: a day, or whole days enough to keep the bars few.
fn bucket_ms(from: UnixMillis, to: UnixMillis) -> i64 {
    let days = ((to.0 - from.0) / DAY_MS).max(1);
    ((days + BUCKETS_MAX - 1) / BUCKETS_MAX) * DAY_MS
}

/// `GET /dashboard/verifications/`.
pub fn page(ctx: &Dashboard, req: &Request) -> Response {
    let signed = match auth::require(ctx, req) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let company = signed.user.company_id;
    let q = Fields::query(req.query());
    let (filter, shown, error) = match parse_filter(&q, company, ctx.clock.now()) {
        Ok((f, s)) => (Some(f), s, None),
        Err(e) => (None, Shown::default(), Some(e)),
    };
    let (list, totals) = match &filter {
        Some(f) => {
            let (f, bucket) = (f.clone(), bucket_ms(f.from, f.to));
            let got = ctx.read(move |r| -> Result<(ListPage, Totals), _> {
                let page = r.verification_list(&f)?;
                let totals =
                    r.verification_totals((f.company_id, f.livemode), f.from, f.to, bucket)?;
                Ok((page, totals))
            });
            match got {
                Ok(v) => v,
                Err(e) => return page::storage_failed("verification list", &e),
            }
        }
        None => (
            ListPage {
                rows: vec![],
                next: None,
            },
            Totals::default(),
        ),
    };
    let share = if totals.total.all == 0 {
        "—".to_owned()
    } else {
        format!(
            "{:.1} %",
            totals.total.completed as f64 * 100.0 / totals.total.all as f64
        )
    };
    let page = VerificationsPage {
        nav: signed.nav("verifications"),
        older: list.next.as_ref().map(|n| older_link(&shown, n)),
        rows: list.rows.iter().map(row_view).collect(),
        total_all: totals.total.all,
        total_completed: totals.total.completed,
        share,
        chart: chart::svg(&totals.buckets, &shown.from, &shown.to),
        shown,
        error: error.clone(),
    };
    page::render(if error.is_some() { 400 } else { 200 }, &page)
}
