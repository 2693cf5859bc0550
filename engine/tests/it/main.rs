//! The engine's integration tests, one binary: "never panics" over the
//! cargo-fuzz corpora and seeded mutations of them, for the HTTP request
//! edge and the create body validator ([`edges`]) and for the SIP edge
//! ([`sip`]).
//!
//! Not for: the loom model checks of the lease table. Those are their own
//! test target (`engine/tests/loom_lease.rs`) because they only build with
//! `RUSTFLAGS="--cfg loom"`, which swaps the engine's atomics for loom's
//! and rebuilds every crate; `tools/test.sh` runs them by that name, in a
//! target directory of their own. Built into this binary, every test here
//! would be built that way too and run outside loom's model, where loom's
//! types panic.

mod corpus;

mod edges;
mod sip;
