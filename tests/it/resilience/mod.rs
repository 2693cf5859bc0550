//! What the service holds against things going wrong: faults of its disk,
//! its storage writer, its providers and registrars ([`fault`]), peers that
//! break the rules on purpose ([`hostile`]), SIGKILLs and restarts
//! ([`crash`]), and the coroutine runtime's own race ([`coroutines`]).
//!
//! Not for: the features themselves when all goes well (the other
//! modules).

mod coroutines;
mod crash;
mod fault;
mod hostile;
