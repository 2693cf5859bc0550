//! The router, the key check and window, the number pool and the three
//! verification handlers.

use crate::store::{hash_secret, now_millis};
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{json, Map, Value};
use sqlx::SqlitePool;
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

const INVALID_KEY: &str = "Недействительный API-ключ.";
const NOT_AUTHENTICATED: &str = "Учетные данные не были предоставлены.";
const NOT_FOUND: &str = "Страница не найдена.";
const SERVER_ERROR: &str = "Произошла ошибка сервера.";
const REQUIRED: &str = "Обязательное поле.";
const BLANK: &str = "Это поле не может быть пустым.";
const BAD_PHONE: &str = "Введите корректный номер телефона.";
const BAD_URL: &str = "Введите правильный URL.";
const BAD_INTEGER: &str = "Введите правильное число.";
const NOT_A_STRING: &str = "Not a valid string.";
/// How long a cached key row is trusted before it is read again (so a
/// revocation takes effect).
const KEY_CACHE_SECONDS: u64 = 5;
const WINDOW_MS: i64 = 60_000;
/// A key's `last_used_at` is written at most this often.
const TOUCH_INTERVAL_MS: i64 = 1_000;
const COLUMNS: &str = "id, company_id, phone, dial_number, pool, client_ref, info, ttl_seconds, \
                       status, created_at, expires_at, completed_at, caller_id";

/// An API key as requests need it, with its company's development URLs.
#[derive(sqlx::FromRow)]
struct Key {
    id: i64,
    company_id: i64,
    secret_hash: String,
    revoked_at: Option<i64>,
    rate_limit_per_minute: Option<i64>,
    dev_webhook_urls: String,
}

/// The free dial numbers of the two pools.
pub struct Numbers {
    domestic: Mutex<Vec<String>>,
    international: Mutex<Vec<String>>,
}

impl Numbers {
    pub fn new(
        domestic: impl Iterator<Item = String>,
        international: impl Iterator<Item = String>,
    ) -> Self {
        Numbers {
            domestic: Mutex::new(domestic.collect()),
            international: Mutex::new(international.collect()),
        }
    }

    fn pool(&self, pool: &str) -> &Mutex<Vec<String>> {
        if pool == "domestic" {
            &self.domestic
        } else {
            &self.international
        }
    }

    fn lease(&self, pool: &str) -> Option<String> {
        self.pool(pool).lock().unwrap().pop()
    }

    fn release(&self, pool: &str, number: String) {
        self.pool(pool).lock().unwrap().push(number);
    }
}

#[derive(Default)]
struct Window {
    allowed: VecDeque<i64>,
    last_touch: i64,
}

pub struct AppState {
    db: SqlitePool,
    numbers: Numbers,
    keys: RwLock<HashMap<String, (Arc<Key>, Instant)>>,
    windows: Mutex<HashMap<String, Window>>,
}

impl AppState {
    pub fn new(db: SqlitePool, numbers: Numbers) -> Arc<Self> {
        Arc::new(AppState {
            db,
            numbers,
            keys: RwLock::default(),
            windows: Mutex::default(),
        })
    }
}

type Shared = Arc<AppState>;

pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/api/v1/verifications/", post(create))
        .route("/api/v1/verifications/{id}/", get(read))
        .route("/api/v1/verifications/{id}/cancel/", post(cancel))
        .with_state(state)
}

fn detail(status: StatusCode, text: &str) -> Response {
    (status, Json(json!({ "detail": text }))).into_response()
}

fn unauthorized(text: &str) -> Response {
    let mut r = detail(StatusCode::UNAUTHORIZED, text);
    r.headers_mut()
        .insert(WWW_AUTHENTICATE, "Bearer".parse().unwrap());
    r
}

fn server_error(e: sqlx::Error) -> Response {
    eprintln!("database error: {e}");
    detail(StatusCode::INTERNAL_SERVER_ERROR, SERVER_ERROR)
}

/// An authenticated caller within its window.
struct Caller(Arc<Key>);

impl FromRequestParts<Shared> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &Shared) -> Result<Self, Response> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| unauthorized(NOT_AUTHENTICATED))?;
        let header = header.to_str().map_err(|_| unauthorized(INVALID_KEY))?;
        let token = match header.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token,
            _ => return Err(unauthorized(NOT_AUTHENTICATED)),
        };
        let (prefix, secret) = parse_token(token).ok_or_else(|| unauthorized(INVALID_KEY))?;
        let key = key_by_prefix(state, prefix)
            .await
            .map_err(server_error)?
            .ok_or_else(|| unauthorized(INVALID_KEY))?;
        let hash = hash_secret(secret);
        let same = hash.len() == key.secret_hash.len()
            && hash
                .bytes()
                .zip(key.secret_hash.bytes())
                .fold(0, |a, (x, y)| a | (x ^ y))
                == 0;
        if !same || key.revoked_at.is_some() {
            return Err(unauthorized(INVALID_KEY));
        }
        if let Err(seconds) = throttle(state, prefix, &key) {
            let text =
                format!("Запрос был проигнорирован. Expected available in {seconds} seconds.");
            let mut r = detail(StatusCode::TOO_MANY_REQUESTS, &text);
            r.headers_mut().insert(RETRY_AFTER, seconds.into());
            return Err(r);
        }
        Ok(Caller(key))
    }
}

/// `svc_live_<8 alphanumerics>_<alphanumerics>` into (prefix, secret).
fn parse_token(token: &str) -> Option<(&str, &str)> {
    let rest = token
        .strip_prefix("svc_live_")
        .filter(|_| token.len() <= 128)?;
    let (prefix, secret) = (rest.get(..8)?, rest.get(8..)?.strip_prefix('_')?);
    let alnum = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric());
    (alnum(prefix) && !secret.is_empty() && alnum(secret)).then_some((prefix, secret))
}

async fn key_by_prefix(state: &AppState, prefix: &str) -> Result<Option<Arc<Key>>, sqlx::Error> {
    if let Some((key, at)) = state.keys.read().unwrap().get(prefix) {
        if at.elapsed() < Duration::from_secs(KEY_CACHE_SECONDS) {
            return Ok(Some(key.clone()));
        }
    }
    let key: Option<Key> = sqlx::query_as(
        "SELECT k.id, k.company_id, k.secret_hash, k.revoked_at, k.rate_limit_per_minute, \
         c.dev_webhook_urls FROM api_keys k JOIN companies c ON c.id = k.company_id \
         WHERE k.prefix = ?",
    )
    .bind(prefix)
    .fetch_optional(&state.db)
    .await?;
    let Some(key) = key.map(Arc::new) else {
        return Ok(None);
    };
    let mut keys = state.keys.write().unwrap();
    keys.insert(prefix.to_owned(), (key.clone(), Instant::now()));
    Ok(Some(key))
}

/// The key's sliding one-minute window (a log of its allowed requests);
/// also writes its `last_used_at`, at most once a second. `Err` holds the
/// whole seconds to wait.
fn throttle(state: &Shared, prefix: &str, key: &Key) -> Result<(), i64> {
    let now = now_millis();
    let limit = key.rate_limit_per_minute.unwrap_or(120).max(1) as usize;
    let touch = {
        let mut windows = state.windows.lock().unwrap();
        let w = windows.entry(prefix.to_owned()).or_default();
        while w.allowed.front().is_some_and(|t| *t <= now - WINDOW_MS) {
            w.allowed.pop_front();
        }
        if w.allowed.len() >= limit {
            let wait = (w.allowed[0] + WINDOW_MS - now).max(1);
            return Err((wait + 999) / 1000);
        }
        w.allowed.push_back(now);
        let touch = now - w.last_touch >= TOUCH_INTERVAL_MS;
        if touch {
            w.last_touch = now;
        }
        touch
    };
    if touch {
        let (db, id) = (state.db.clone(), key.id);
        tokio::spawn(async move {
            let q = sqlx::query("UPDATE api_keys SET last_used_at = ? WHERE id = ?");
            if let Err(e) = q.bind(now).bind(id).execute(&db).await {
                eprintln!("last_used_at not written: {e}");
            }
        });
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    company_id: i64,
    phone: String,
    dial_number: String,
    pool: String,
    client_ref: String,
    info: String,
    ttl_seconds: i64,
    status: String,
    created_at: i64,
    expires_at: i64,
    completed_at: Option<i64>,
    caller_id: String,
}

/// The spec's Verification object.
#[derive(Serialize)]
struct Verification<'a> {
    verification_id: &'a str,
    phone: &'a str,
    dial_number: &'a str,
    client_ref: &'a str,
    info: &'a str,
    status: &'a str,
    ttl_seconds: i64,
    created_at: String,
    expires_at: String,
    completed_at: Option<String>,
    caller_id_received: &'a str,
}

fn rfc3339(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Row {
    fn render(&self, status: StatusCode) -> Response {
        let completed = self.status == "completed";
        let body = Verification {
            verification_id: &self.id,
            phone: &self.phone,
            dial_number: &self.dial_number,
            client_ref: &self.client_ref,
            info: &self.info,
            status: &self.status,
            ttl_seconds: self.ttl_seconds,
            created_at: rfc3339(self.created_at),
            expires_at: rfc3339(self.expires_at),
            completed_at: self.completed_at.filter(|_| completed).map(rfc3339),
            caller_id_received: if completed { &self.caller_id } else { "" },
        };
        (status, Json(body)).into_response()
    }
}

/// The create body once every field passed.
struct Input {
    phone: String,
    webhook_url: String,
    client_ref: String,
    info: String,
    ttl_seconds: i64,
}

async fn create(
    State(state): State<Shared>,
    Caller(key): Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let media = headers
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    let is_json = media
        .as_deref()
        .and_then(|m| m.split(';').next())
        .map(str::trim);
    if !body.is_empty() && !is_json.is_some_and(|m| m.eq_ignore_ascii_case("application/json")) {
        let text = format!(
            "Неподдерживаемый тип данных \"{}\" в запросе.",
            media.unwrap_or_default()
        );
        return detail(StatusCode::UNSUPPORTED_MEDIA_TYPE, &text);
    }
    let input = match validate(&body, &key).await {
        Ok(input) => input,
        Err(response) => return response,
    };
    let pool = if input.phone.starts_with("+7") {
        "domestic"
    } else {
        "international"
    };
    let Some(dial_number) = state.numbers.lease(pool) else {
        return no_number(&state, &key, &input.phone, pool).await;
    };
    let now = now_millis();
    let row = Row {
        id: format!("ver_{}", ulid::Ulid::new()),
        company_id: key.company_id,
        phone: input.phone,
        dial_number,
        pool: pool.to_owned(),
        client_ref: input.client_ref,
        info: input.info,
        ttl_seconds: input.ttl_seconds,
        status: "pending".to_owned(),
        created_at: now,
        expires_at: now + input.ttl_seconds * 1000,
        completed_at: None,
        caller_id: String::new(),
    };
    let inserted = sqlx::query(
        "INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number, pool, \
         client_ref, info, webhook_url, ttl_seconds, status, created_at, expires_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
    )
    .bind(&row.id)
    .bind(row.company_id)
    .bind(key.id)
    .bind(&row.phone)
    .bind(&row.dial_number)
    .bind(pool)
    .bind(&row.client_ref)
    .bind(&row.info)
    .bind(&input.webhook_url)
    .bind(row.ttl_seconds)
    .bind(row.created_at)
    .bind(row.expires_at)
    .execute(&state.db)
    .await;
    if let Err(e) = inserted {
        state.numbers.release(pool, row.dial_number);
        return server_error(e);
    }
    schedule_expiry(
        &state,
        row.id.clone(),
        pool.to_owned(),
        row.dial_number.clone(),
        row.expires_at,
    );
    let mut response = row.render(StatusCode::CREATED);
    let location = format!("/api/v1/verifications/{}/", row.id);
    response
        .headers_mut()
        .insert(LOCATION, location.parse().unwrap());
    response
}

/// The 503, once its rejection row is committed (the dashboard counts it).
async fn no_number(state: &AppState, key: &Key, phone: &str, pool: &str) -> Response {
    eprintln!("WARNING: no dial number available in pool {pool}; create rejected with 503");
    let stored = sqlx::query(
        "INSERT INTO rejections (company_id, api_key_id, phone, pool, reason, created_at) \
         VALUES (?, ?, ?, ?, 'all lines busy', ?)",
    )
    .bind(key.company_id)
    .bind(key.id)
    .bind(phone)
    .bind(pool)
    .bind(now_millis())
    .execute(&state.db)
    .await;
    if let Err(e) = stored {
        return server_error(e);
    }
    let body = json!({
        "error": "no_dial_number_available",
        "message": "No dial number is available right now; retry later.",
        "retry_after": 60,
    });
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    response.headers_mut().insert(RETRY_AFTER, 60.into());
    response
}

/// Expires a pending verification at its deadline and frees its number.
fn schedule_expiry(state: &Shared, id: String, pool: String, number: String, expires_at: i64) {
    let state = state.clone();
    let wait = Duration::from_millis((expires_at - now_millis()).max(0) as u64);
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let expired = sqlx::query(
            "UPDATE verifications SET status = 'expired' WHERE id = ? AND status = 'pending'",
        )
        .bind(&id)
        .execute(&state.db)
        .await;
        match expired {
            Ok(done) if done.rows_affected() == 1 => state.numbers.release(&pool, number),
            Ok(_) => {} // cancelled before: its number is already back
            Err(e) => eprintln!("expiry of {id} failed: {e}"),
        }
    });
}

/// Pending verifications left by a previous run keep their numbers and get
/// their timers again.
pub async fn recover(state: &Shared) -> Result<(), sqlx::Error> {
    let pending: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT id, pool, dial_number, expires_at FROM verifications WHERE status = 'pending'",
    )
    .fetch_all(&state.db)
    .await?;
    let leased: HashSet<&str> = pending.iter().map(|p| p.2.as_str()).collect();
    for pool in ["domestic", "international"] {
        state
            .numbers
            .pool(pool)
            .lock()
            .unwrap()
            .retain(|n| !leased.contains(n.as_str()));
    }
    for (id, pool, number, expires_at) in pending {
        schedule_expiry(state, id, pool, number, expires_at);
    }
    Ok(())
}

fn is_verification_id(id: &str) -> bool {
    id.strip_prefix("ver_")
        .is_some_and(|u| u.len() == 26 && u.bytes().all(|b| b.is_ascii_alphanumeric()))
}

async fn read(
    State(state): State<Shared>,
    Caller(key): Caller,
    Path(id): Path<String>,
) -> Response {
    if !is_verification_id(&id) {
        return detail(StatusCode::NOT_FOUND, NOT_FOUND);
    }
    let row: Result<Option<Row>, _> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM verifications WHERE id = ? AND company_id = ?"
    ))
    .bind(&id)
    .bind(key.company_id)
    .fetch_optional(&state.db)
    .await;
    match row {
        Ok(Some(row)) => row.render(StatusCode::OK),
        Ok(None) => detail(StatusCode::NOT_FOUND, NOT_FOUND),
        Err(e) => server_error(e),
    }
}

async fn cancel(
    State(state): State<Shared>,
    Caller(key): Caller,
    Path(id): Path<String>,
) -> Response {
    if !is_verification_id(&id) {
        return detail(StatusCode::NOT_FOUND, NOT_FOUND);
    }
    let cancelled: Result<Option<Row>, _> = sqlx::query_as(&format!(
        "UPDATE verifications SET status = 'expired' \
         WHERE id = ? AND company_id = ? AND status = 'pending' RETURNING {COLUMNS}"
    ))
    .bind(&id)
    .bind(key.company_id)
    .fetch_optional(&state.db)
    .await;
    match cancelled {
        Ok(Some(row)) => {
            state.numbers.release(&row.pool, row.dial_number.clone());
            row.render(StatusCode::OK)
        }
        // Not pending (terminal: returned as it is) or not there at all.
        Ok(None) => read(State(state), Caller(key), Path(id)).await,
        Err(e) => server_error(e),
    }
}

/// The E.164 form of a valid subscriber phone: `+` and 8-15 digits, then
/// libphonenumber's opinion of the number.
pub fn normalize_phone(text: &str) -> Option<String> {
    use rlibphonenumber::{PhoneNumber, PhoneNumberFormat};
    let digits = text.strip_prefix('+')?;
    if !(8..=15).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number = PhoneNumber::parse(text, None).ok()?;
    number
        .is_valid()
        .then(|| number.format_as(PhoneNumberFormat::E164).into_owned())
}

fn too_long(max: usize) -> String {
    format!("Убедитесь, что это значение содержит не более {max} символов.")
}

/// A string field as DRF's CharField reads it: numbers taken as text,
/// trimmed; `Ok(None)` when it is missing or blank.
fn text_field(value: Option<&Value>, max: usize) -> Result<Option<String>, Vec<String>> {
    let text = match value {
        None => return Ok(None),
        Some(Value::Null) => return Err(vec![BLANK.into()]),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(vec![NOT_A_STRING.into()]),
    };
    if text.is_empty() {
        return Ok(None);
    }
    let mut errors = Vec::new();
    if text.chars().count() > max {
        errors.push(too_long(max));
    }
    if text.contains('\0') {
        errors.push("Null characters are not allowed.".into());
    }
    if errors.is_empty() {
        Ok(Some(text))
    } else {
        Err(errors)
    }
}

fn required(
    field: Result<Option<String>, Vec<String>>,
    present: bool,
) -> Result<String, Vec<String>> {
    match field? {
        Some(text) => Ok(text),
        None if present => Err(vec![BLANK.into()]),
        None => Err(vec![REQUIRED.into()]),
    }
}

fn ttl_field(value: Option<&Value>) -> Result<i64, Vec<String>> {
    let requested = match value {
        None => return Ok(60),
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(Value::Null) => return Err(vec![BLANK.into()]),
        Some(_) => None,
    };
    match requested {
        None => Err(vec![BAD_INTEGER.into()]),
        Some(t) if t < 1 => Err(vec![
            "Убедитесь, что это значение больше либо равно 1.".into()
        ]),
        Some(t) if t > 3600 => Err(vec![
            "Убедитесь, что это значение меньше либо равно 3600.".into()
        ]),
        Some(t) => Ok(t.clamp(30, 600)),
    }
}

/// Syntax of the webhook URL (the `url` crate's parser, http or https, a
/// host, no credentials).
fn url_syntax(text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|_| BAD_URL.to_owned())?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!(
            "webhook_url scheme must be http or https, got '{}'",
            url.scheme()
        ));
    }
    if url.host_str().is_none() {
        return Err(BAD_URL.into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("webhook_url must not contain embedded credentials".into());
    }
    Ok(url)
}

/// The SSRF rule: a company's development URL (the URL itself or anything
/// below it) may be http and point anywhere; any other must be https and
/// resolve only to public addresses.
async fn ssrf_guard(url: &url::Url, text: &str, key: &Key) -> Result<(), String> {
    let dev = key
        .dev_webhook_urls
        .lines()
        .filter(|d| !d.is_empty())
        .any(|d| {
            text == d
                || text.starts_with(d)
                    && (d.ends_with('/') || matches!(text.as_bytes()[d.len()], b'/' | b'?' | b'#'))
        });
    if dev {
        return Ok(());
    }
    if url.scheme() != "https" {
        return Err(format!(
            "webhook_url must use https; http is allowed only for a development URL (got {text})"
        ));
    }
    let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((host, url.port_or_known_default().unwrap_or(443)))
            .await
            .map_err(|e| format!("webhook_url host cannot be resolved: {e}"))?
            .map(|a| a.ip())
            .collect(),
    };
    match addresses.into_iter().find(|ip| is_internal(*ip)) {
        Some(ip) => Err(format!(
            "webhook_url resolves to a private/internal address ({ip})"
        )),
        None => Ok(()),
    }
}

fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.octets()[0] == 100 && v4.octets()[1] & 0xc0 == 64
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_internal(IpAddr::V4(v4)),
            None => {
                let s = v6.segments()[0];
                v6.is_loopback()
                    || v6.is_unspecified()
                    || s & 0xfe00 == 0xfc00
                    || s & 0xffc0 == 0xfe80
            }
        },
    }
}

/// Every field checked, all errors reported together in field order.
async fn validate(body: &[u8], key: &Key) -> Result<Input, Response> {
    let object = if body.is_empty() {
        Map::new()
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                let kind = match other {
                    Value::Array(_) => "list",
                    Value::String(_) => "str",
                    Value::Number(_) => "int",
                    Value::Bool(_) => "bool",
                    _ => "NoneType",
                };
                let text =
                    format!("Недопустимые данные. Ожидался dictionary, но был получен {kind}.");
                let body = json!({ "non_field_errors": [text] });
                return Err((StatusCode::BAD_REQUEST, Json(body)).into_response());
            }
            Err(e) => {
                let text = format!("JSON parse error - {e}");
                return Err(detail(StatusCode::BAD_REQUEST, &text));
            }
        }
    };
    let phone = match object.get("phone") {
        Some(Value::String(s)) if s.trim().chars().count() > 32 => Err(vec![too_long(32)]),
        value => required(text_field(value, 32), value.is_some())
            .and_then(|p| normalize_phone(&p).ok_or_else(|| vec![BAD_PHONE.into()])),
    };
    let value = object.get("webhook_url");
    let mut webhook_url = required(text_field(value, 500), value.is_some()).and_then(|u| {
        url_syntax(&u)
            .map(|parsed| (u, parsed))
            .map_err(|e| vec![e])
    });
    let refused = match &webhook_url {
        Ok((text, parsed)) => ssrf_guard(parsed, text, key).await.err(),
        Err(_) => None,
    };
    if let Some(e) = refused {
        webhook_url = Err(vec![e]);
    }
    let client_ref = text_field(object.get("client_ref"), 120);
    let info = text_field(object.get("info"), 500);
    let ttl = ttl_field(object.get("ttl_seconds"));
    match (phone, webhook_url, client_ref, info, ttl) {
        (Ok(phone), Ok((webhook_url, _)), Ok(client_ref), Ok(info), Ok(ttl_seconds)) => Ok(Input {
            phone,
            webhook_url,
            client_ref: client_ref.unwrap_or_default(),
            info: info.unwrap_or_default(),
            ttl_seconds,
        }),
        (phone, webhook_url, client_ref, info, ttl) => {
            let mut errors = Map::new();
            let fields = [
                ("phone", phone.err()),
                ("webhook_url", webhook_url.err()),
                ("client_ref", client_ref.err()),
                ("info", info.err()),
                ("ttl_seconds", ttl.err()),
            ];
            for (name, messages) in fields {
                if let Some(messages) = messages {
                    errors.insert(name.to_owned(), json!(messages));
                }
            }
            Err((StatusCode::BAD_REQUEST, Json(Value::Object(errors))).into_response())
        }
    }
}
