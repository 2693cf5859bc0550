//! The OpenAPI 3.0 document at `/api/schema/` and the body types it
//! describes.
//!
//! The response bodies here are the very types the handlers serialise
//! ([`Verification`], [`NoNumberAvailable`], [`ErrorDetail`]), so a field
//! added to a response shows up in the schema by construction. The request
//! body is validated by hand in the engine (to answer exactly as DRF does),
//! so [`CreateVerificationRequest`] exists only to be described; a unit test
//! pins each of its constraints to the engine's named limits, so the two
//! cannot drift apart silently.
//!
//! Not for: serving the explorer (see [`docs`]).

pub mod docs;

use dialproof_engine::time::UnixMillis;
use serde::Serialize;
use std::sync::OnceLock;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// A verification, as create, read and cancel return it.
// (It borrows its text from the row it shows, see `api::verifications`,
// so rendering one copies nothing but into the body. A plain comment: a
// doc comment here would become the schema's description.)
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Verification<'a> {
    /// `ver_` followed by a 26-character ULID.
    #[schema(
        pattern = r"^ver_[0-9A-Za-z]{26}$",
        example = "ver_01JD8X5Q2M3N4P5R6S7T8V9W0X"
    )]
    pub verification_id: &'a str,
    /// The subscriber phone from the request, in E.164.
    #[schema(example = "+79123456789")]
    pub phone: &'a str,
    /// The number the user must call, in E.164.
    #[schema(example = "+74950000001")]
    pub dial_number: &'a str,
    /// Echo of the request; empty string by default.
    pub client_ref: &'a str,
    /// Echo of the request; empty string by default.
    pub info: &'a str,
    /// `pending` on creation; `completed`, `expired` and `failed` are terminal.
    #[schema(value_type = String, pattern = "^(pending|completed|expired|failed)$", example = "pending")]
    pub status: &'static str,
    /// The effective TTL: the requested value clamped into 30..600 (default 60).
    #[schema(minimum = 30, maximum = 600, example = 60)]
    pub ttl_seconds: u32,
    /// Creation moment, UTC.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Moment,
    /// `created_at + ttl_seconds`; after it the number is released.
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: Moment,
    /// The moment of the call; set only when `status` is `completed`.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub completed_at: Option<Moment>,
    /// The Caller-ID recorded at the call; empty unless `completed`.
    pub caller_id_received: &'a str,
    /// The header the Caller-ID was read from: `p_asserted_identity`,
    /// `remote_party_id` or `from` (`simulated` for a test-mode call made
    /// by `simulate-call`); null until a call completes the verification.
    #[schema(value_type = Option<String>, nullable = true,
        pattern = "^(p_asserted_identity|remote_party_id|from|simulated)$", example = "p_asserted_identity")]
    pub caller_id_source: Option<&'static str>,
    /// How far the network vouched for the Caller-ID: `verified` (the
    /// header carries `verstat=TN-Validation-Passed` from the line's trusted
    /// provider), `failed` (`TN-Validation-Failed`), `asserted`
    /// (P-Asserted-Identity of a trusted provider, no verdict) or
    /// `unverified` (`simulated` for a test-mode call made by
    /// `simulate-call`); null until a call completes the verification.
    #[schema(value_type = Option<String>, nullable = true,
        pattern = "^(verified|failed|asserted|unverified|simulated)$", example = "asserted")]
    pub caller_id_trust: Option<&'static str>,
    /// `true` for a verification created with a live key, `false` for one
    /// created with a test key (`svc_test_`): test mode's numbers are not
    /// real and no real call can complete it.
    #[schema(example = true)]
    pub livemode: bool,
}

/// A moment as every body writes it: RFC 3339 in UTC with milliseconds
/// (`2026-11-26T06:55:00.123Z`), written straight into the body rather
/// than through a string of its own.
#[derive(Debug, Clone, Copy)]
pub struct Moment(pub UnixMillis);

impl Serialize for Moment {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // One string of 24 ASCII bytes (`collect_str` went through
        // `core::fmt` and escaped each of its pieces).
        match self.0.rfc3339() {
            Some(text) => serializer.serialize_str(text.as_str()),
            None => serializer.collect_str(&self.0),
        }
    }
}

/// The answer of test mode's `simulate-call`: what the simulated call did
/// and the verification after it.
#[derive(Serialize, ToSchema)]
pub struct SimulatedCall<'a> {
    /// `completed`: the call completed the verification (its webhook is on
    /// its way); `caller_withheld`: `caller_id` was null, the verification
    /// stays pending; `no_pending_verification`: it was no longer pending
    /// (completed, cancelled, or past `expires_at`), nothing changed.
    #[schema(value_type = String,
        pattern = "^(completed|caller_withheld|no_pending_verification)$", example = "completed")]
    pub outcome: &'static str,
    pub verification: Verification<'a>,
}

/// The body of `simulate-call`.
#[derive(serde::Deserialize, ToSchema)]
#[allow(dead_code)] // Described, never constructed: the engine parses bodies.
pub struct SimulateCallRequest {
    /// The caller's number as a line of the verification's pool kind would
    /// receive it (`+79161234567`, or national: `89161234567` in the domestic
    /// pool), or null for a withheld caller.
    #[schema(nullable = true, example = "+79161234567")]
    caller_id: Option<String>,
}

/// The body of a create request. (`Deserialize` is derived only so that
/// `serde(default)` can mark the optional fields for the schema.)
#[derive(serde::Deserialize, ToSchema)]
#[allow(dead_code)] // Described, never constructed: the engine parses bodies.
pub struct CreateVerificationRequest {
    /// Subscriber phone in E.164: `+`, country code, 8 to 15 digits in all.
    /// `+7` numbers get a domestic dial number, all others an international one.
    #[schema(
        max_length = 32,
        pattern = r"^\+[0-9]{8,15}$",
        example = "+79123456789"
    )]
    phone: String,
    /// Where the result is POSTed. Must resolve to a public address.
    #[schema(
        max_length = 500,
        format = "uri",
        example = "https://93.184.216.34/hooks/dialproof"
    )]
    webhook_url: String,
    /// Your reference, returned in the webhook.
    #[serde(default)]
    #[schema(max_length = 120, default = "")]
    client_ref: String,
    /// Free descriptive text, returned in responses and the webhook.
    #[serde(default)]
    #[schema(max_length = 500, default = "")]
    info: String,
    /// Accepted 1..3600; the effective value is clamped into 30..600.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3600, default = 60)]
    ttl_seconds: i64,
}

/// The 503 body when no dial number is free for the phone's pool.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NoNumberAvailable {
    /// Always `no_dial_number_available`.
    #[schema(value_type = String, pattern = "^no_dial_number_available$")]
    pub error: &'static str,
    /// Human-readable; may change; not to be parsed.
    #[schema(value_type = String)]
    pub message: &'static str,
    /// Seconds to wait; duplicates the `Retry-After` header. Currently 60.
    pub retry_after: u64,
}

/// `{detail}`, defined beside the response type, since the HTTP layer's
/// own refusals carry it too.
pub use crate::http::ErrorDetail;

/// A 400 for invalid fields: each invalid field maps to its messages.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"phone": ["Введите корректный номер телефона."]}))]
#[allow(dead_code)] // Described, never constructed: FieldErrors renders it.
pub struct FieldErrors(std::collections::HashMap<String, Vec<String>>);

/// The envelope of answers to newer behaviour (the `Idempotency-Key`'s 400
/// and the two 409s): `{"error": {"code", "message", "fields"?}}`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"error": {"code": "idempotency_conflict",
    "message": "This Idempotency-Key was used with a different request. Use a new key for a new request."}}))]
#[allow(dead_code)] // Described only: handlers build it with `envelope`.
pub struct ErrorEnvelope {
    error: ErrorBody,
}

/// The inside of [`ErrorEnvelope`].
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // Described only.
pub struct ErrorBody {
    /// A machine code: `invalid_request`, `conflict`,
    /// `idempotency_conflict`, ... Clients key their logic on it.
    code: String,
    /// Human-readable; may change; not to be parsed.
    message: String,
    /// Only for `invalid_request`: each invalid field or header mapped to
    /// its messages.
    fields: Option<std::collections::HashMap<String, Vec<String>>>,
}

/// A 400 body: field errors, `{detail}` for a body that is not JSON, or
/// the envelope for an invalid `Idempotency-Key` header. (`Serialize` is
/// derived only so that `serde(untagged)` gives a plain `oneOf`.)
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Described only.
pub enum BadRequest {
    Fields(FieldErrors),
    Detail(ErrorDetail),
    Envelope(ErrorEnvelope),
}

/// The id path parameter.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // Described only.
struct VerificationPath {
    /// A verification id, `ver_` followed by 26 alphanumerics.
    id: String,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Dialproof",
        description = "Phone-ownership verification by inbound call. Create a verification, \
                       let the user call its `dial_number`, receive the Caller-ID by webhook \
                       or by polling.",
        version = "1"
    ),
    paths(create, read, cancel, simulate_call),
    // Without a tag utoipa files every operation under "crate" (its
    // default), which the explorer shows as a group and generated clients
    // use as a module name (`api/crate/`).
    tags((name = "verifications", description = "Create, read and cancel phone verifications")),
    components(schemas(
        Verification,
        CreateVerificationRequest,
        NoNumberAvailable,
        ErrorDetail,
        FieldErrors,
        BadRequest,
        ErrorEnvelope,
        ErrorBody,
        SimulatedCall,
        SimulateCallRequest
    )),
    modifiers(&BearerAuth),
    security(("bearerAuth" = []))
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let mut http = Http::new(HttpAuthScheme::Bearer);
        http.description = Some(
            "`svc_live_<prefix>_<secret>`, or a test-mode key `svc_test_<prefix>_<secret>`"
                .to_owned(),
        );
        components.add_security_scheme("bearerAuth", SecurityScheme::Http(http));
    }
}

/// The error answers every endpoint shares: authentication, permission,
/// method, throttling and service faults (in the spec's order of checks).
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Described only: handlers build these with Response::detail.
enum CommonErrors {
    #[response(status = 401, description = "No, malformed, unknown or revoked key",
        headers(("WWW-Authenticate" = String, description = "Bearer")))]
    Unauthorized(ErrorDetail),
    #[response(status = 403, description = "Authenticated, but not with an API key")]
    Forbidden(ErrorDetail),
    #[response(status = 405, description = "Method not allowed", headers(("Allow" = String)))]
    MethodNotAllowed(ErrorDetail),
    #[response(status = 429, description = "Over the key's requests per minute",
        headers(("Retry-After" = i64, description = "Seconds to wait")))]
    Throttled(ErrorDetail),
    #[response(status = 500, description = "Service fault")]
    Fault(ErrorDetail),
}

/// Create a verification and lease a dial number.
///
/// Without an `Idempotency-Key`, repeating an identical request creates
/// another verification and takes another number. With one, a retry with
/// the same key and body within its retention (24 hours by default) gets
/// the first 201 again, byte for byte, with `Idempotent-Replayed: true`,
/// and takes nothing: after a network timeout, retry with the same key.
#[utoipa::path(
    post,
    path = "/api/v1/verifications/",
    operation_id = "create_verification",
    tag = "verifications",
    request_body(content = CreateVerificationRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Created, or the stored answer of this \
            `Idempotency-Key` replayed", body = Verification,
            headers(
                ("Location" = String, description = "/api/v1/verifications/<verification_id>/"),
                ("Idempotent-Replayed" = String, description = "`true` when this is a \
                    replay of the key's first answer; absent otherwise"))),
        (status = 400, description = "Invalid fields (`{field: [messages]}`), malformed JSON \
            (`{detail}`), or an invalid `Idempotency-Key` (the envelope, code \
            `invalid_request`, with `fields.Idempotency-Key`)", body = BadRequest),
        (status = 409, description = "`idempotency_conflict`: the `Idempotency-Key` was \
            used with a different request body (use a new key); or `conflict`: the first \
            request with this key is still being processed (retry after `Retry-After`)",
            body = ErrorEnvelope,
            headers(("Retry-After" = i64, description = "1, with `conflict` only"))),
        (status = 415, description = "A non-empty body whose `Content-Type` is not \
            `application/json` (DRF's text, in Russian, quoting the header as sent)",
            body = ErrorDetail),
        CommonErrors,
        (status = 503, description = "No dial number available for the phone's pool",
            body = NoNumberAvailable,
            headers(("Retry-After" = i64, description = "Always 60"))),
    )
)]
#[allow(dead_code)] // Documentation anchor for the create handler.
fn create() {}

/// Read a verification of the key's company.
#[utoipa::path(
    get,
    path = "/api/v1/verifications/{id}/",
    operation_id = "read_verification",
    tag = "verifications",
    params(VerificationPath),
    responses(
        (status = 200, description = "The verification", body = Verification),
        (status = 404, description = "Unknown, or of another company", body = ErrorDetail),
        CommonErrors,
    )
)]
#[allow(dead_code)] // Documentation anchor for the read handler.
fn read() {}

/// Cancel a verification: release its number at once and set `expired`.
///
/// Idempotent. A call that arrived first keeps `completed`: check `status`
/// in the response. No webhook is sent.
#[utoipa::path(
    post,
    path = "/api/v1/verifications/{id}/cancel/",
    operation_id = "cancel_verification",
    tag = "verifications",
    params(VerificationPath),
    responses(
        (status = 200, description = "The verification after the cancel", body = Verification),
        (status = 404, description = "Unknown, or of another company", body = ErrorDetail),
        CommonErrors,
    )
)]
#[allow(dead_code)] // Documentation anchor for the cancel handler.
fn cancel() {}

/// Test mode only: simulate the user's call to a test verification.
///
/// Only a test key (`svc_test_`) may call this; a live key gets 404, as
/// for an unknown id. The call is decided exactly as a real call to the
/// verification's number: `caller_id` is read like a caller ID on a line
/// of the verification's pool kind (`89161234567` is `+79161234567` in
/// the domestic pool); null is a withheld caller, which leaves the
/// verification pending. A call that completes it sends the signed
/// `verification.completed` webhook (`livemode: false`), with
/// `caller_id_source` and `caller_id_trust` `simulated`. A call to a
/// verification that is no longer pending (completed, cancelled, or past
/// its `expires_at`, as a real call to a released number) changes nothing.
#[utoipa::path(
    post,
    path = "/api/v1/verifications/{id}/simulate-call/",
    operation_id = "simulate_call",
    tag = "verifications",
    params(VerificationPath),
    request_body(content = SimulateCallRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "What the simulated call did (`outcome`) and the \
            verification after it", body = SimulatedCall),
        (status = 400, description = "The body is not a JSON object, has no `caller_id`, or \
            `caller_id` is not a string or null or not a phone number (the envelope, code \
            `invalid_request`, with `fields.caller_id`)", body = ErrorEnvelope),
        (status = 404, description = "Unknown, of another company or mode, or the key is a \
            live key", body = ErrorDetail),
        (status = 415, description = "A non-empty body whose `Content-Type` is not \
            `application/json`", body = ErrorDetail),
        CommonErrors,
    )
)]
#[allow(dead_code)] // Documentation anchor for the simulate-call handler.
fn simulate_call() {}

/// Marks test mode's operation with `x-test-mode-only: true` (an OpenAPI
/// extension: explorers show it, generators keep it).
fn mark_test_mode_only(doc: &mut serde_json::Value) {
    let op = &mut doc["paths"]["/api/v1/verifications/{id}/simulate-call/"]["post"];
    if let Some(op) = op.as_object_mut() {
        op.insert("x-test-mode-only".to_owned(), serde_json::Value::Bool(true));
    }
}

/// The document as served, built once.
pub fn schema_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        // The derive produces a well-formed document; serialising it cannot
        // fail (every map key is a string).
        let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
        add_links(&mut doc);
        add_idempotency_header(&mut doc);
        mark_test_mode_only(&mut doc);
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    })
}

/// OpenAPI links from the 201 of create to read and cancel (utoipa 4 has no
/// way to declare them): generated clients and tools such as schemathesis
/// learn that `verification_id` from a create is the `{id}` of the others.
fn add_links(doc: &mut serde_json::Value) {
    let link = |operation: &str| {
        serde_json::json!({
            "operationId": operation,
            "parameters": { "id": "$response.body#/verification_id" },
        })
    };
    let created = &mut doc["paths"]["/api/v1/verifications/"]["post"]["responses"]["201"];
    if created.is_object() {
        created["links"] = serde_json::json!({
            "ReadVerification": link("read_verification"),
            "CancelVerification": link("cancel_verification"),
        });
    }
}

/// The `Idempotency-Key` request header of create (utoipa 4's path macro
/// cannot give a header parameter a pattern). The schema names the bare
/// form; the Structured Field string form, in double quotes, names the same
/// key and is accepted too.
fn add_idempotency_header(doc: &mut serde_json::Value) {
    use dialproof_engine::idempotency::KEY_LEN_MAX;
    let post = &mut doc["paths"]["/api/v1/verifications/"]["post"];
    if !post.is_object() {
        return;
    }
    post["parameters"] = serde_json::json!([{
        "name": "Idempotency-Key",
        "in": "header",
        "required": false,
        "description": "Makes the create safe to retry. 1 to 255 visible ASCII characters \
            (0x21-0x7E), unique per request you mean (a UUID, or your order id); also \
            accepted as a quoted string (`\"key\"`). Keys are per company and honoured \
            for the retention (24 hours by default). A repeated or invalid header is a 400.",
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": KEY_LEN_MAX,
            "pattern": format!("^[!#-~][!-~]{{0,{}}}$", KEY_LEN_MAX - 1),
            "example": "order-4711-attempt",
        },
    }]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialproof_engine::validate as v;
    use serde_json::Value;

    fn doc() -> Value {
        serde_json::from_str(schema_json()).expect("schema is JSON")
    }

    #[test]
    fn every_operation_is_tagged_verifications() {
        let d = doc();
        assert_eq!(d["tags"][0]["name"], "verifications");
        let mut operations = 0;
        for (_, item) in d["paths"].as_object().unwrap() {
            for (_, op) in item.as_object().unwrap() {
                assert_eq!(op["tags"], serde_json::json!(["verifications"]), "{op}");
                operations += 1;
            }
        }
        assert_eq!(operations, 4);
    }

    /// Test mode's endpoint is marked so, for readers and tools alike, and
    /// every Verification names its mode.
    #[test]
    fn simulate_call_is_marked_test_mode_only_and_livemode_is_required() {
        let d = doc();
        let op = &d["paths"]["/api/v1/verifications/{id}/simulate-call/"]["post"];
        assert_eq!(op["x-test-mode-only"], true, "{op}");
        assert!(op["summary"]
            .as_str()
            .unwrap()
            .starts_with("Test mode only"));
        let required = &d["components"]["schemas"]["Verification"]["required"];
        assert!(required.as_array().unwrap().contains(&"livemode".into()));
    }

    #[test]
    fn is_openapi_3_0_with_bearer_security() {
        let d = doc();
        assert!(d["openapi"].as_str().unwrap().starts_with("3.0."));
        assert_eq!(
            d["components"]["securitySchemes"]["bearerAuth"],
            serde_json::json!({"type": "http", "scheme": "bearer",
                "description": "`svc_live_<prefix>_<secret>`, or a test-mode key \
                    `svc_test_<prefix>_<secret>`"})
        );
    }

    /// The request schema's limits are the engine's limits.
    #[test]
    fn request_constraints_match_the_engine() {
        let d = doc();
        let p = &d["components"]["schemas"]["CreateVerificationRequest"]["properties"];
        assert_eq!(p["phone"]["maxLength"], v::PHONE_CHARS_MAX);
        assert_eq!(p["webhook_url"]["maxLength"], v::WEBHOOK_URL_CHARS_MAX);
        assert_eq!(p["client_ref"]["maxLength"], v::CLIENT_REF_CHARS_MAX);
        assert_eq!(p["info"]["maxLength"], v::INFO_CHARS_MAX);
        assert_eq!(p["ttl_seconds"]["minimum"], v::TTL_SECONDS_REQUEST_MIN);
        assert_eq!(p["ttl_seconds"]["maximum"], v::TTL_SECONDS_REQUEST_MAX);
        assert_eq!(
            p["ttl_seconds"]["default"],
            dialproof_engine::verification::TTL_SECONDS_DEFAULT
        );
        let pattern = format!(
            r"^\+[0-9]{{{},{}}}$",
            v::PHONE_DIGITS_MIN,
            v::PHONE_DIGITS_MAX
        );
        assert_eq!(p["phone"]["pattern"], pattern.as_str());
        let req = d["components"]["schemas"]["CreateVerificationRequest"]["required"].clone();
        assert_eq!(req, serde_json::json!(["phone", "webhook_url"]));
        let resp = &d["components"]["schemas"]["Verification"]["properties"]["ttl_seconds"];
        assert_eq!(
            resp["minimum"],
            dialproof_engine::verification::TTL_SECONDS_MIN
        );
        assert_eq!(
            resp["maximum"],
            dialproof_engine::verification::TTL_SECONDS_MAX
        );
    }

    #[test]
    fn create_links_to_read_and_cancel() {
        let d = doc();
        let links = &d["paths"]["/api/v1/verifications/"]["post"]["responses"]["201"]["links"];
        assert_eq!(
            links["ReadVerification"]["operationId"],
            "read_verification"
        );
        assert_eq!(
            links["CancelVerification"]["operationId"],
            "cancel_verification"
        );
        let bad = &d["components"]["schemas"]["BadRequest"]["oneOf"];
        assert_eq!(bad[0]["$ref"], "#/components/schemas/FieldErrors");
        assert_eq!(bad[1]["$ref"], "#/components/schemas/ErrorDetail");
        assert_eq!(bad[2]["$ref"], "#/components/schemas/ErrorEnvelope");
    }

    /// The header's documented limit is the engine's.
    #[test]
    fn create_documents_the_idempotency_key_header() {
        let d = doc();
        let post = &d["paths"]["/api/v1/verifications/"]["post"];
        let p = &post["parameters"][0];
        assert_eq!(p["name"], "Idempotency-Key");
        assert_eq!(p["in"], "header");
        assert_eq!(p["required"], false);
        assert_eq!(
            p["schema"]["maxLength"],
            dialproof_engine::idempotency::KEY_LEN_MAX
        );
        assert!(post["responses"]["201"]["headers"]["Idempotent-Replayed"].is_object());
        assert!(post["responses"]["409"]["headers"]["Retry-After"].is_object());
    }

    #[test]
    fn every_operation_lists_the_spec_responses() {
        let d = doc();
        let codes = |path: &str, method: &str| -> Vec<String> {
            let mut codes: Vec<String> = d["paths"][path][method]["responses"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            codes.sort();
            codes
        };
        assert_eq!(
            codes("/api/v1/verifications/", "post"),
            ["201", "400", "401", "403", "405", "409", "415", "429", "500", "503"]
        );
        assert_eq!(
            codes("/api/v1/verifications/{id}/", "get"),
            ["200", "401", "403", "404", "405", "429", "500"]
        );
        assert_eq!(
            codes("/api/v1/verifications/{id}/cancel/", "post"),
            ["200", "401", "403", "404", "405", "429", "500"]
        );
    }
}
