//! A comparison baseline, not product code: Dialproof's three public
//! verification endpoints written the way a competent axum developer would
//! write them (axum + tokio with 2 workers + sqlx on SQLite in WAL + rustls),
//! so that `tools/create-vs-axum.sh` can measure Dialproof against it with
//! the same wrk script in the same run (issue 13).
//!
//! What it does per request, mirroring what Dialproof pays:
//! - Bearer `svc_live_<prefix>_<secret>`: the key row found by prefix in an
//!   in-memory cache (filled from SQLite on a miss, re-read after 5 s), the
//!   secret's SHA-256 compared with the stored hash;
//! - a per-key sliding one-minute window (the key's own limit);
//! - create: the body checked field by field (phone with libphonenumber,
//!   webhook_url syntax and the SSRF rule with development URLs, lengths,
//!   ttl clamp), one number leased from an in-memory free list, the row
//!   INSERTed and committed before the 201; 503 (its rejection row committed
//!   first) when the pool is empty; a tokio timer expires it at its TTL;
//! - read: the row SELECTed from SQLite; cancel: an UPDATE, the number
//!   given back.
//!
//! Not here: SIP calls and webhooks (nothing is ever sent), the dashboard,
//! DRF's exact wording of every corner case.
//!
//!   axum-baseline setup --db DB --keys 40 --rate-limit 100000 --dev-url http://127.0.0.1:9/
//!   axum-baseline serve --db DB --listen 127.0.0.1:0 --cert-dir DIR --domestic 100000

mod api;
mod store;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "axum + sqlx baseline of Dialproof's public API (benchmark only)")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the database if needed, one company and N API keys; print the
    /// tokens one per line.
    Setup {
        #[arg(long)]
        db: PathBuf,
        #[arg(long, default_value_t = 1)]
        keys: usize,
        /// Requests per minute per key.
        #[arg(long, default_value_t = 120)]
        rate_limit: u32,
        /// A development URL of the company (http and loopback allowed).
        #[arg(long)]
        dev_url: Vec<String>,
    },
    /// Serve HTTPS with a self-signed certificate generated at start.
    Serve {
        #[arg(long)]
        db: PathBuf,
        #[arg(long, default_value = "127.0.0.1:8443")]
        listen: SocketAddr,
        /// Where cert.pem is written (for clients to trust).
        #[arg(long)]
        cert_dir: PathBuf,
        /// Domestic numbers (+7...), leased to +7 phones.
        #[arg(long, default_value_t = 10)]
        domestic: u32,
        /// International numbers, leased to every other country code.
        #[arg(long, default_value_t = 10)]
        international: u32,
    },
}

fn main() -> Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match args.command {
            Command::Setup {
                db,
                keys,
                rate_limit,
                dev_url,
            } => {
                let db = store::open(&db).await?;
                for token in store::setup(&db, keys, rate_limit, &dev_url).await? {
                    println!("{token}");
                }
                Ok(())
            }
            Command::Serve {
                db,
                listen,
                cert_dir,
                domestic,
                international,
            } => serve(db, listen, cert_dir, domestic, international).await,
        }
    })
}

async fn serve(
    db: PathBuf,
    listen: SocketAddr,
    cert_dir: PathBuf,
    domestic: u32,
    international: u32,
) -> Result<()> {
    let db = store::open(&db).await?;
    let numbers = api::Numbers::new(
        (0..domestic).map(|i| format!("+7495{i:07}")),
        (0..international).map(|i| format!("+4420{i:08}")),
    );
    let state = api::AppState::new(db, numbers);
    api::recover(&state).await?;
    rlibphonenumber_warm_up();

    let tls = tls_config(&cert_dir)?;
    let listener = std::net::TcpListener::bind(listen)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    println!("READY https={addr}");
    axum_server::from_tcp_rustls(listener, tls)
        .serve(api::router(state).into_make_service())
        .await?;
    Ok(())
}

/// The first parse loads libphonenumber's metadata (tens of ms): not in the
/// first request.
fn rlibphonenumber_warm_up() {
    let _ = api::normalize_phone("+79123456789");
}

/// A self-signed certificate for localhost/127.0.0.1, written to
/// `cert_dir/cert.pem`, and a rustls config on ring.
fn tls_config(cert_dir: &std::path::Path) -> Result<axum_server::tls_rustls::RustlsConfig> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])?;
    std::fs::create_dir_all(cert_dir)?;
    std::fs::write(cert_dir.join("cert.pem"), cert.cert.pem()).context("writing cert.pem")?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(axum_server::tls_rustls::RustlsConfig::from_config(
        std::sync::Arc::new(config),
    ))
}
