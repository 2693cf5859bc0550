//! Account and operator rules, in one home: what a key's label may be and
//! how a key is minted, how a company's webhook secret is rotated and how
//! long the previous one keeps signing, which development URLs a company
//! may add, what a password and an email must be and how a password is
//! hashed, how long a dashboard session lasts and how its cookie reads, and
//! how many login attempts a client address gets.
//!
//! Both front doors call these same functions, so a rule cannot differ
//! between them: the operator commands (`crate::cli`, another process with
//! its own `Admin` connection) and the dashboard (`crate::dashboard`, through
//! the service's one long-lived operator connection,
//! `crate::shared::admin`). A refusal is a typed error; each caller words it
//! for its own reader (English on the command line, Russian on the pages).
//!
//! Not for: HTTP handling (the dashboard's pages and login endpoints),
//! printing (the CLI), the SQL (`dialproof_storage::Admin`), the API key and
//! webhook secret formats (`dialproof_engine::apikey`), or checking a key on
//! a request (`crate::api`).

pub mod companies;
pub mod keys;
pub mod login;
pub mod passwords;
pub mod sessions;
pub mod users;

use dialproof_engine::ratelimit::Decision;

/// A window's decision as the account rules answer it: `Err` with the
/// seconds to wait when refused (a block and a full window alike).
fn allowed(decision: Decision) -> Result<(), u64> {
    match decision {
        Decision::Allow => Ok(()),
        Decision::Refuse {
            retry_after_seconds,
            ..
        } => Err(retry_after_seconds),
    }
}
