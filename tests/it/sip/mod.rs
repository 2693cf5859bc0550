//! SIP over real UDP against the real binary: inbound calls that complete
//! verifications ([`calls`]), CANCEL ([`cancel`]), a line's registration
//! and its loss ([`register`]), and calls through a real provider
//! registrar, Kamailio ([`kamailio`]).
//!
//! Not for: hostile SIP peers (`resilience::hostile::sip`,
//! `resilience::hostile::sip_register`) or providers and registrars that
//! fall silent (`resilience::fault`).

mod caller_evidence;
mod calls;
mod cancel;
pub(crate) mod kamailio;
mod number_health;
mod overload;
mod register;
