//! A thin typed client of etcd's v3 JSON gateway (`/v3/...`, keys and
//! values base64, 64-bit integers as strings): lease grant, keep-alive and
//! revoke, the primary key's compare-and-put, and a watch of the key.
//!
//! Every reply is parsed here into typed values; a reply that does not
//! parse is an error like an unreachable member, never a panic. Each call
//! goes to one member with a short timeout; a failure moves the next call
//! to the next member, so a dead or partitioned member costs one retry.
//!
//! Not for: when to call (`dialproof_engine::ha`). Uses the service's
//! HTTP client (ureq) as the webhooks do: the gateway is plain JSON over
//! HTTP, so a gRPC stack would add a code generator and an async runtime
//! for four calls.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use dialproof_engine::ha::LeaseId;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use ureq::Agent;

/// How a call failed.
#[derive(Debug)]
pub enum EtcdError {
    /// No answer (refused, timed out, cut off).
    Unreachable(String),
    /// An answer that is not a success (no quorum, bad request).
    Refused(u16, String),
    /// A 200 whose body is not what the gateway sends.
    Reply(String),
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EtcdError::Unreachable(e) => write!(f, "etcd unreachable: {e}"),
            EtcdError::Refused(s, body) => write!(f, "etcd answered {s}: {body}"),
            EtcdError::Reply(e) => write!(f, "etcd reply not understood: {e}"),
        }
    }
}

/// The outcome of a campaign's compare-and-put.
#[derive(Debug, PartialEq, Eq)]
pub enum Acquired {
    /// Put at this revision.
    Won(i64),
    /// Held by the node named (its value), if the key was still there.
    HeldBy(Option<String>),
}

pub struct Etcd {
    endpoints: Vec<String>,
    agent: Agent,
    /// For the watch: no overall timeout, only the connect's.
    streaming: Agent,
    next: AtomicUsize,
}

impl Etcd {
    pub fn new(endpoints: &[String], call_timeout: Duration) -> Etcd {
        let agent = |timeout: Option<Duration>| -> Agent {
            Agent::config_builder()
                .timeout_global(timeout)
                .timeout_connect(Some(call_timeout))
                .http_status_as_error(false)
                .proxy(None)
                .build()
                .into()
        };
        Etcd {
            endpoints: endpoints
                .iter()
                .map(|e| e.trim_end_matches('/').to_owned())
                .collect(),
            agent: agent(Some(call_timeout)),
            streaming: agent(None),
            next: AtomicUsize::new(0),
        }
    }

    fn endpoint(&self) -> (usize, &str) {
        let i = self.next.load(Ordering::Relaxed) % self.endpoints.len().max(1);
        (i, self.endpoints.get(i).map_or("", String::as_str))
    }

    /// Moves later calls to the next member after a failure on `i`.
    fn failed(&self, i: usize) {
        let _ = self.next.compare_exchange(
            i,
            (i + 1) % self.endpoints.len().max(1),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    fn post(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let (i, base) = self.endpoint();
        let result = self.post_to(base, path, body);
        if result.is_err() {
            self.failed(i);
        }
        result
    }

    fn post_to(&self, base: &str, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let mut response = self
            .agent
            .post(format!("{base}{path}"))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map_err(|e| EtcdError::Unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(1 << 20)
            .read_to_string()
            .map_err(|e| EtcdError::Unreachable(e.to_string()))?;
        if status != 200 {
            return Err(EtcdError::Refused(status, text.chars().take(300).collect()));
        }
        let value: Value =
            serde_json::from_str(&text).map_err(|e| EtcdError::Reply(e.to_string()))?;
        // An error inside a 200 (a stream's failure) is a refusal too.
        if let Some(e) = value.get("error") {
            return Err(EtcdError::Refused(status, e.to_string()));
        }
        Ok(value)
    }

    /// A new lease of `ttl_seconds`.
    pub fn grant(&self, ttl_seconds: u64) -> Result<LeaseId, EtcdError> {
        let reply = self.post("/v3/lease/grant", &json!({ "TTL": ttl_seconds }))?;
        match (int(&reply, "ID"), int(&reply, "TTL")) {
            (Some(id), Some(ttl)) if id != 0 && ttl > 0 => Ok(id),
            _ => Err(EtcdError::Reply(format!(
                "grant without an ID and TTL: {reply}"
            ))),
        }
    }

    /// One keep-alive: `Some(ttl)` while the lease lives, `None` once etcd
    /// no longer has it.
    pub fn keep_alive(&self, lease: LeaseId) -> Result<Option<i64>, EtcdError> {
        let reply = self.post("/v3/lease/keepalive", &json!({ "ID": lease.to_string() }))?;
        let result = reply
            .get("result")
            .ok_or_else(|| EtcdError::Reply(format!("keep-alive without a result: {reply}")))?;
        // A lease that is gone comes back with no TTL (proto3 omits 0).
        Ok(int(result, "TTL").filter(|ttl| *ttl > 0))
    }

    /// Revokes `lease` (its key goes with it).
    pub fn revoke(&self, lease: LeaseId) -> Result<(), EtcdError> {
        self.post("/v3/lease/revoke", &json!({ "ID": lease.to_string() }))
            .map(|_| ())
    }

    /// Puts `key = value` under `lease` if nobody holds the key.
    pub fn acquire(&self, key: &str, value: &str, lease: LeaseId) -> Result<Acquired, EtcdError> {
        let k = B64.encode(key);
        let body = json!({
            "compare": [{ "key": k, "result": "EQUAL", "target": "CREATE", "create_revision": "0" }],
            "success": [{ "request_put": { "key": k, "value": B64.encode(value), "lease": lease.to_string() } }],
            "failure": [{ "request_range": { "key": k } }],
        });
        let reply = self.post("/v3/kv/txn", &body)?;
        if reply.get("succeeded").and_then(Value::as_bool) == Some(true) {
            let revision = reply.get("header").and_then(|h| int(h, "revision"));
            return revision
                .map(Acquired::Won)
                .ok_or_else(|| EtcdError::Reply(format!("txn without a revision: {reply}")));
        }
        let holder = reply
            .pointer("/responses/0/response_range/kvs/0/value")
            .and_then(Value::as_str)
            .and_then(|v| B64.decode(v).ok())
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        Ok(Acquired::HeldBy(holder))
    }

    /// Watches `key` until the stream ends or fails, calling `on_delete`
    /// with the revision of every deletion. Returns why it ended.
    pub fn watch(&self, key: &str, mut on_delete: impl FnMut(i64)) -> EtcdError {
        let (i, base) = self.endpoint();
        let body = json!({ "create_request": { "key": B64.encode(key) } });
        let sent = self
            .streaming
            .post(format!("{base}/v3/watch"))
            .header("Content-Type", "application/json")
            .send(body.to_string());
        let mut response = match sent {
            Ok(r) if r.status().as_u16() == 200 => r,
            Ok(r) => {
                self.failed(i);
                return EtcdError::Refused(r.status().as_u16(), "watch refused".into());
            }
            Err(e) => {
                self.failed(i);
                return EtcdError::Unreachable(e.to_string());
            }
        };
        let reader = BufReader::new(response.body_mut().as_reader());
        for line in reader.lines() {
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    self.failed(i);
                    return EtcdError::Unreachable(e.to_string());
                }
            };
            match deletions(&line) {
                Ok(revisions) => revisions.into_iter().for_each(&mut on_delete),
                Err(e) => return e,
            }
        }
        self.failed(i);
        EtcdError::Unreachable("the watch stream ended".into())
    }
}

/// The revisions of the deletions one line of the watch stream reports.
pub fn deletions(line: &str) -> Result<Vec<i64>, EtcdError> {
    if line.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: Value = serde_json::from_str(line).map_err(|e| EtcdError::Reply(e.to_string()))?;
    if let Some(e) = v.get("error") {
        return Err(EtcdError::Refused(200, e.to_string()));
    }
    let events = v.pointer("/result/events").and_then(Value::as_array);
    let Some(events) = events else {
        return Ok(Vec::new());
    };
    events
        .iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("DELETE"))
        .map(|e| {
            e.get("kv")
                .and_then(|kv| int(kv, "mod_revision"))
                .ok_or_else(|| EtcdError::Reply(format!("a deletion without a revision: {e}")))
        })
        .collect()
}

/// A 64-bit integer field, which the gateway writes as a string.
fn int(v: &Value, name: &str) -> Option<i64> {
    match v.get(name)? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_lines_count_deletions_only() {
        let created = r#"{"result":{"header":{"revision":"2"},"created":true}}"#;
        assert_eq!(deletions(created).unwrap(), Vec::<i64>::new());
        let put = r#"{"result":{"events":[{"kv":{"key":"YQ==","mod_revision":"4"}}]}}"#;
        assert!(deletions(put).unwrap().is_empty());
        let del =
            r#"{"result":{"events":[{"type":"DELETE","kv":{"key":"YQ==","mod_revision":"5"}}]}}"#;
        assert_eq!(deletions(del).unwrap(), vec![5]);
        let bad = r#"{"result":{"events":[{"type":"DELETE","kv":{"key":"YQ=="}}]}}"#;
        assert!(deletions(bad).is_err());
        assert!(deletions("{not json").is_err());
        assert!(deletions(r#"{"error":{"grpc_code":14}}"#).is_err());
        assert!(deletions("").unwrap().is_empty());
    }

    #[test]
    fn integers_come_as_strings_or_numbers() {
        let v = json!({"ID": "7668682477605926661", "TTL": 5, "X": true});
        assert_eq!(int(&v, "ID"), Some(7668682477605926661));
        assert_eq!(int(&v, "TTL"), Some(5));
        assert_eq!(int(&v, "X"), None);
        assert_eq!(int(&v, "Y"), None);
    }
}
