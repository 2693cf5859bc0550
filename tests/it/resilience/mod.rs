//! What the service holds against things going wrong: faults of its disk,
//! its storage writer, its providers and registrars ([`fault`]), peers that
//! break the rules on purpose ([`hostile`]), and SIGKILLs and restarts
//! ([`crash`]).
//!
//! Not for: the features themselves when all goes well (the other
//! modules).

mod crash;
mod fault;
mod hostile;
