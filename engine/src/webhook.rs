//! Webhook payloads and signatures.
//!
//! The body is built once, when the transition commits, and stored in the
//! outbox as bytes: every retry sends exactly the same bytes, so a receiver's
//! signature check and idempotency on (verification_id, type) hold.
//! The signature is Stripe's scheme: `t=<unix>,v1=<hex hmac-sha256 of
//! "<t>.<body>">`, with one `v1=` entry per active secret (two during the
//! grace period after a rotation).
//!
//! Not for: sending, scheduling or SSRF checks at delivery.

use crate::caller_evidence::CallerEvidence;
use crate::time::UnixMillis;
use crate::verification::EventType;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

/// What a webhook reports about a verification.
#[derive(Debug, Clone)]
pub struct PayloadFields<'a> {
    pub event: EventType,
    pub verification_id: &'a str,
    pub phone: &'a str,
    pub dial_number: &'a str,
    pub client_ref: &'a str,
    pub info: &'a str,
    /// Only for `verification.completed`.
    pub caller_id: Option<&'a str>,
    /// Only for `verification.completed`: `caller_id_source` and
    /// `caller_id_trust`.
    pub caller_evidence: Option<CallerEvidence>,
    /// The moment of the terminal event: the call for completed, the TTL
    /// expiry for expired, the failure for failed.
    pub completed_at: UnixMillis,
    /// `false` for a test-mode verification.
    pub livemode: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    verification_id: &'a str,
    phone: &'a str,
    dial_number: &'a str,
    client_ref: &'a str,
    info: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    caller_id: Option<&'a str>,
    /// Present (possibly null) exactly when `caller_id` is.
    #[serde(skip_serializing_if = "Option::is_none")]
    caller_id_source: Option<Option<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    caller_id_trust: Option<Option<&'static str>>,
    completed_at: String,
    livemode: bool,
}

/// The exact bytes POSTed to the client.
pub fn payload_json(f: &PayloadFields<'_>) -> String {
    let completed = f.event == EventType::Completed;
    let evidence =
        |pick: fn(CallerEvidence) -> &'static str| completed.then(|| f.caller_evidence.map(pick));
    let body = Body {
        kind: f.event.as_str(),
        verification_id: f.verification_id,
        phone: f.phone,
        dial_number: f.dial_number,
        client_ref: f.client_ref,
        info: f.info,
        caller_id: if completed { f.caller_id } else { None },
        caller_id_source: evidence(|e| e.source.as_str()),
        caller_id_trust: evidence(|e| e.trust.as_str()),
        completed_at: f.completed_at.to_rfc3339(),
        livemode: f.livemode,
    };
    // Serialising a struct of strings cannot fail.
    serde_json::to_string(&body).unwrap_or_default()
}

/// `t=<unix>,v1=<hex>[,v1=<hex>]`: one `v1` per secret, in the given order.
pub fn signature_header(unix_seconds: i64, body: &[u8], secrets: &[&str]) -> String {
    let mut header = format!("t={unix_seconds}");
    for secret in secrets {
        header.push_str(",v1=");
        header.push_str(&sign(unix_seconds, body, secret));
    }
    header
}

/// Lowercase hex HMAC-SHA256 of `"<t>.<body>"` keyed with `secret`.
pub fn sign(unix_seconds: i64, body: &[u8], secret: &str) -> String {
    // HMAC accepts keys of any length, so construction cannot fail.
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(unix_seconds.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_payload_has_every_field() {
        let body = payload_json(&PayloadFields {
            event: EventType::Completed,
            verification_id: "ver_01ARZ3NDEKTSV4RRFFQ69G5FAV",
            phone: "+79123456789",
            dial_number: "+74950000001",
            client_ref: "order-1",
            info: "",
            caller_id: Some("+79123456789"),
            caller_evidence: Some(CallerEvidence {
                source: crate::caller_evidence::CallerIdSource::PAssertedIdentity,
                trust: crate::caller_evidence::CallerIdTrust::Verified,
            }),
            completed_at: UnixMillis(0),
            livemode: true,
        });
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["type"], "verification.completed");
        assert_eq!(v["caller_id"], "+79123456789");
        assert_eq!(v["completed_at"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["caller_id_source"], "p_asserted_identity");
        assert_eq!(v["caller_id_trust"], "verified");
        assert_eq!(v["livemode"], true);
        assert_eq!(v.as_object().unwrap().len(), 11);
    }

    #[test]
    fn expired_payload_has_no_caller_id() {
        let body = payload_json(&PayloadFields {
            event: EventType::Expired,
            verification_id: "v",
            phone: "p",
            dial_number: "d",
            client_ref: "",
            info: "",
            caller_id: Some("+1"),
            caller_evidence: None,
            completed_at: UnixMillis(0),
            livemode: true,
        });
        assert!(!body.contains("caller_id"));
    }

    #[test]
    fn signature_matches_a_known_vector() {
        // Computed independently with Python:
        // hmac.new(b"whsec_test", b"1700000000.{}", hashlib.sha256).hexdigest()
        assert_eq!(
            sign(1_700_000_000, b"{}", "whsec_test"),
            "35495024f4ef3f94e5a93e22221544c4b75e9a42300cd965ab81cb85cd994e91"
        );
        let h = signature_header(1_700_000_000, b"{}", &["a", "b"]);
        assert_eq!(h.matches(",v1=").count(), 2);
        assert!(h.starts_with("t=1700000000,v1="));
    }
}
