//! The spec's error envelope for new behaviour,
//! `{"error": {"code", "message", "fields"?}}`: the answers of an
//! `Idempotency-Key` (`super::idempotent`) and of the dashboard's JSON
//! login (`crate::dashboard`).
//!
//! Not for: the DRF `{detail}` body of the original endpoints
//! (`crate::http::Response::detail`).

use crate::http::Response;
use serde_json::{json, Value};

/// A JSON response with `status` in the envelope; `fields` maps field
/// names to their messages.
pub fn envelope(status: u16, code: &str, message: &str, fields: Option<Value>) -> Response {
    let mut error = json!({ "code": code, "message": message });
    if let Some(f) = fields {
        error["fields"] = f;
    }
    Response::json(status, json!({ "error": error }).to_string())
}
