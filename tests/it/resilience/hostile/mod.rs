//! Peers that break the rules on purpose, against the real binary: HTTP
//! clients ([`http`]), SIP senders ([`sip`]), registrars with hostile
//! digest challenges ([`sip_register`]) and webhook receivers
//! ([`receivers`]). The service must answer clearly, change nothing it
//! should not, never panic, and keep serving.
//!
//! Not for: peers that merely fall silent (`super::fault`).

mod http;
mod receivers;
mod sip;
mod sip_register;
