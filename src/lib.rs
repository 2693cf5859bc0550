//! Dialproof: phone-ownership verification by inbound call (the service as
//! a library: `main.rs` is its command line; tests start it in process on
//! a virtual clock through [`runtime::service::start`]).
//!
//! This is the architecture for the people who change the code; the
//! repository's `README.md` is for the people who use and run the service.
//!
//! # The workspace
//!
//! - `engine/` (`dialproof_engine`): the sans-IO core. Every decision: the
//!   lease table, the verification state machine, the expiry schedule, rate
//!   limits, validation, the HTTP head's rules, SSRF ranges, webhook
//!   payloads, signatures and schedule, SIP (parsing, routing, callers,
//!   transactions, registration) and a promoted standby's hold. No clock,
//!   no IO.
//! - `storage/` (`dialproof_storage`): SQLite behind one group-commit writer
//!   thread and a reader pool, and the commit events it reports. No HTTP.
//! - `src/` (this crate): the service as glue only.
//! - `tests/`: black-box tests of the built binary or of the service in
//!   process (their strategy: `tests/README.md`); `benches/`: criterion
//!   benchmarks and an axum baseline (`benches/README.md`); `tools/`: the
//!   bundled tools and scripts (`tools/README.md`).
//!
//! # This crate's folders
//!
//! The binary is glue: it reads the configuration, opens storage, starts the
//! listeners and threads, and runs the operator commands. Decisions live in
//! `dialproof-engine`, persistence in `dialproof-storage`.
//!
//! Its folders are the runtime's parts:
//! - `ha/`: `dialproof ha`, one node of automatic failover: the etcd
//!   client, the supervisor that runs the engine's election machine and
//!   the node's processes (the service as `serve --ha-child`, whose fence
//!   is `runtime/ha_child.rs` and `shared/fence.rs`, and Litestream); above
//!   the runtime, whose preflight it reuses;
//! - `runtime/`: the preflight checks (`dialproof check`, also run by
//!   `serve`), start, recovery, stop, and the threads that are nobody
//!   else's (commit consumer, expiry, control loop, a promoted standby's
//!   hold, the replication heartbeat); it builds each part's context
//!   (`runtime/app.rs`) and no part imports it;
//! - `shared/`: the handles the runtime hands to the parts (clock,
//!   configuration, lease table, expiry schedule, metrics, resolver, key
//!   cache, request windows, operator connection, thread pool);
//! - `build_info`: the release and git commit (`--version`, metrics);
//! - `coroutine`: spawning may coroutines (below everything, HTTP included);
//! - `http/`: listeners, TLS, the HTTP/1.1 layer, the port-80 redirect; it
//!   imports no other part;
//! - `site`: the HTTPS router above the API, the explorer and the dashboard;
//! - `api/`: the public API's endpoints and authentication;
//! - `dashboard/`: the dashboard's pages and its login endpoints;
//! - `accounts/`: account and operator rules (keys and labels, webhook
//!   secrets, passwords, sessions, login limits, development URLs), called
//!   by the dashboard and the CLI alike;
//! - `openapi/`: the schema and the explorer;
//! - `ops/`: the operators' listener (metrics, health, readiness);
//! - `sip/`: the SIP socket, lines, calls;
//! - `webhooks/`: the outbox driver and the HTTP senders;
//! - `cli/`: the operator commands.
//!
//! Each part receives only its own context ([`api::Api`], [`sip::Sip`],
//! [`webhooks::Webhooks`], [`ops::Ops`]), built at start.
//!
//! # A create request, file by file
//!
//! `http/listener.rs` accepts the connection on a may coroutine and runs
//! rustls; `http/conn.rs` reads the request within its limits (the head
//! parsed and checked by `engine/src/http_head.rs`) and hands it to
//! `site.rs`, which routes it to `api/`; `api/mod.rs` authenticates the key
//! (`api/auth.rs`, `shared/key_cache.rs`) and charges its window
//! (`shared/rate_limiters.rs`, deciding in `engine/src/ratelimit.rs`). `api/create.rs` reads an
//! `Idempotency-Key` and claims it (`api/idempotent.rs`,
//! `shared/idempotency.rs` over `engine/src/idempotency/`; a repeated key
//! is answered there), validates the body (`engine/src/validate/`), checks
//! the webhook URL (`api/webhook_guard.rs`, `engine/src/ssrf.rs`), leases a
//! number (`shared/leases.rs` over `engine/src/lease/`), has the engine
//! start the verification (`engine/src/verification_start.rs`: pending, its
//! expiry) and commits the row, with the key and the 201 body, through the
//! writer (`shared/wait.rs` over `storage/src/writer/`) before it answers
//! 201. The writer reports the commit
//! (`storage/src/committed.rs`) to the one commit consumer,
//! `runtime/commits.rs`, which schedules the expiry (`shared/expiries.rs`
//! over `engine/src/expiry.rs`; the thread that submits due expiries is
//! `runtime/expiry.rs`), holds the pending row, packed, for reads
//! (`shared/held_rows.rs`) and records a key's answer for its retries.
//!
//! # An INVITE, file by file
//!
//! `sip/driver.rs` receives the datagram and feeds the server transaction
//! (`engine/src/sip/server.rs`, parsed by `engine/src/sip/message.rs`).
//! `sip/calls.rs` keeps only the lines that trust the source, asks
//! `engine/src/sip/route.rs` which line and number were dialled, reads the
//! caller (`engine/src/sip/identity.rs`) and submits the transition; the
//! engine's state machine (`engine/src/verification.rs`) decides in the
//! writer. After COMMIT the driver sends the final response, with the
//! call's outcome in a `Warning` header (`engine/src/sip/outcome.rs`), and
//! the commit consumer releases the number, wakes the webhook driver
//! (`webhooks/driver.rs`) for the outbox row and logs the end; a sender
//! thread (`webhooks/sender.rs`) signs and posts it.
//!
//! # Test mode
//!
//! A test key (`svc_test_`, `engine/src/apikey.rs`) takes the same path as
//! a live one with three differences: `api/create.rs` leases from the
//! company's test pool (`engine/src/test_pool.rs`, held beside the live
//! table in `shared/leases.rs`), every read, cancel and idempotency lookup
//! is scoped by company and mode (`dialproof_storage::Owner`,
//! `engine/src/idempotency/table.rs`'s `Space`), and
//! `api/simulate.rs` stands in for the INVITE: it decides in the order of
//! `sip/calls.rs` (`engine/src/simulated_call.rs`) and submits the same
//! write (`WriteOp::call`), so the writer, the commit consumer and the
//! webhook senders cannot tell the two apart except by `livemode`. The
//! control loop purges test rows after their retention
//! (`storage/src/test_rows.rs`).
//!
//! # Design rules
//!
//! - Decisions are sans-IO state machines in `engine/`, driven in the
//!   quinn-proto shape: `handle_*(now, input)` in, `poll_*()` out, timers
//!   through `poll_timeout`/`handle_timeout(now)`; `now` is always passed
//!   in from the one injected clock (`shared/clock.rs`), which tests
//!   replace with a virtual one. `engine/` has no IO and no clock;
//!   `storage/` has no HTTP; `src/` is glue.
//! - No import circle and no arrow that runs back up: `runtime/` builds
//!   every part and nothing imports it; the parts meet through `shared/`.
//! - One owner for every consequence of a commit: the commit consumer
//!   (`runtime/commits.rs`) releases numbers, schedules expiries, wakes the
//!   webhook driver and logs. No must-happen event goes through a send
//!   that can refuse or drop it.
//! - A peer's bytes never cause a panic: they are parsed at the edge into
//!   typed values (`engine/src/http_head.rs`, `engine/src/sip/message.rs`,
//!   `engine/src/validate/`), fuzzed (`engine/fuzz/`); bad input gets a
//!   clear, specified error and changes nothing.
//! - No test-only switch in production code: tests change the world the
//!   service sees (a virtual clock handed in, network namespaces with their
//!   own `/etc/hosts`), not the service. Fail points
//!   (`DIALPROOF_FAILPOINTS`, `storage/src/failpoints.rs`) are an
//!   operator's fault-injection tool, documented as such.
//! - Every module opens with what it is for and what it is not for;
//!   functions stay around 60 lines; comments say why. Speed is shown by
//!   benchmarks against a baseline in the same run, never by timed
//!   assertions in tests.
//!
//! # Several active nodes (on paper)
//!
//! An operator with more SIP trunks than one node should carry can run
//! several primaries, each with its own standby, each owning a disjoint set
//! of lines and numbers and its own database. Ids then name their node (a
//! node prefix in the ULID's random part, or a `ver_<node>_...` form), so a
//! GET or cancel that reaches the wrong node is forwarded (or redirected) to
//! the owner, and a call arrives only at the node that owns the dialled
//! number, as the trunk routes it. A create goes to any node with free
//! numbers in the pool (round-robin at the load balancer, retrying another
//! node on 503). Trade-offs: no cross-node transaction is needed (a number
//! and its verification live on one node) and a node's failure only affects
//! its own numbers, but the pools are split (one node can be out of numbers
//! while another has plenty), dedicated numbers pin a company to a node, the
//! dashboard and the delivery log must merge the nodes' views, and a key
//! revocation or secret rotation must reach every node (the operator CLI
//! would write to each database, or a small shared config store would hold
//! companies and keys). One SQLite node already carries far more creates
//! than a number inventory absorbs, so this is about trunk capacity and
//! blast radius, not throughput.

pub mod accounts;
pub mod api;
pub mod build_info;
pub mod cli;
pub mod coroutine;
pub mod dashboard;
pub mod ha;
pub mod http;
pub mod openapi;
pub mod ops;
pub mod runtime;
pub mod shared;
pub mod sip;
pub mod site;
pub mod webhooks;
