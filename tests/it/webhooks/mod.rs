//! Webhooks end to end, against real receivers on loopback: the payload,
//! headers and signature and its retries ([`delivery`]), a completion by a
//! real call ([`call`]), the per-receiver limit ([`concurrency`]),
//! `verification.failed` ([`failed`]), the previous secret after a rotation
//! ([`secret_rotation`]), deliveries due across a restart ([`restart`]),
//! the SSRF guard at delivery time ([`rebinding`]), delivery over HTTPS
//! ([`tls`]) and the pipeline's CPU priority ([`priority`]).
//!
//! Not for: receivers that misbehave (`resilience::hostile::receivers`),
//! or the dashboard's delivery log (`dashboard::webhooks`).

mod call;
mod concurrency;
mod delivery;
mod failed;
mod priority;
mod rebinding;
mod restart;
mod secret_rotation;
mod tls;
