//! The command line: `serve`, and the operator commands that manage
//! companies, keys and number dedications directly in the database (the
//! running service picks changes up within a second).
//!
//! Every command prints a human-readable answer, or one JSON object with
//! `--json` for scripts. Secrets (API tokens, webhook secrets) are printed
//! once, at creation, and are never retrievable again.
//!
//! Not for: the rules an account change keeps (labels, secret rotation,
//! passwords, development URLs: `crate::accounts`, which the dashboard
//! calls too) or running the service (`crate::runtime`).

mod delivery;
mod keys;
mod number_health;
mod rejection;

use crate::accounts::{companies, users};
use crate::shared::config::{Config, ConfiguredNumber};
use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use dialproof_engine::time::UnixMillis;
use dialproof_storage::Admin;
use dialproof_storage::CompanyRow;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Parser)]
#[command(
    name = "dialproof",
    version = crate::build_info::VERSION_LINE,
    about = "Phone-ownership verification by inbound call"
)]
pub struct Args {
    /// Configuration file. Without it, ./dialproof.toml is used if present,
    /// else the built-in default (loopback, ./data).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Print one JSON object instead of text (operator commands).
    #[arg(long, global = true)]
    pub json: bool,
    /// Log line format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service.
    Serve(ServeArgs),
    /// Run one node of an automatic-failover cluster (`[ha]`): campaign in
    /// etcd, serve and replicate as the primary, watch as a standby.
    Ha,
    /// Check the configuration as `serve` would, print what it would
    /// start, and exit 1 with one line per problem (changes nothing).
    Check,
    /// Companies (API clients).
    #[command(subcommand)]
    Company(CompanyCmd),
    /// API keys.
    #[command(subcommand)]
    Key(KeyCmd),
    /// Dashboard users (they sign in at /dashboard/login/).
    #[command(subcommand)]
    User(UserCmd),
    /// Dial numbers: listing and dedication to one company.
    #[command(subcommand)]
    Number(NumberCmd),
    /// Webhook deliveries: the log of attempts, and a manual retry.
    #[command(subcommand)]
    Delivery(delivery::DeliveryCmd),
    /// Create requests refused with 503 ('all lines busy').
    #[command(subcommand)]
    Rejection(rejection::RejectionCmd),
}

/// `serve`'s options.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Start as a standby promoted over a database restored from the
    /// replica: hold back the numbers the old primary's lost tail may have
    /// leased (tools/deploy/README.md, "Standby with Litestream").
    #[arg(long)]
    pub promoted: bool,
    /// With --promoted: when the old primary stopped committing (Unix
    /// seconds, e.g. `date -d '10:03:15' +%s`); default: now.
    #[arg(long, requires = "promoted", value_name = "UNIX_SECONDS")]
    pub lost_until: Option<i64>,
    /// Run under `dialproof ha`: stdin carries the supervisor's lease
    /// words; a `fence`, a lease run out or a closed stdin fences at once.
    #[arg(long, hide = true)]
    pub ha_child: bool,
}

#[derive(Debug, Subcommand)]
pub enum CompanyCmd {
    /// Create a company; prints its id and its webhook secret (once).
    Create {
        #[arg(long)]
        name: String,
    },
    /// List companies.
    List,
    /// Rotate the webhook secret; prints the new secret (once). The old one
    /// keeps signing alongside for 24 hours.
    RotateSecret { id: i64 },
    /// Send `verification.failed` webhooks to this company (off by default).
    FailedWebhooks {
        id: i64,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Replace the whole list of development URL prefixes (http allowed,
    /// and loopback or private addresses); `--clear` empties it.
    DevUrls {
        id: i64,
        #[arg(required_unless_present = "clear")]
        urls: Vec<String>,
        #[arg(long, conflicts_with = "urls")]
        clear: bool,
    },
    /// Development URL prefixes one at a time: list, add, remove.
    #[command(subcommand)]
    DevUrl(DevUrlCmd),
    /// Numbers in each of the company's test pools (domestic and
    /// international), or `default`.
    TestPoolSize { id: i64, size: String },
}

#[derive(Debug, Subcommand)]
pub enum DevUrlCmd {
    /// Print the company's development URL prefixes.
    List { id: i64 },
    /// Add one prefix (adding one already there changes nothing).
    Add { id: i64, url: String },
    /// Remove one prefix (an error if it is not in the list).
    Remove { id: i64, url: String },
}

#[derive(Debug, Subcommand)]
pub enum KeyCmd {
    /// Create a key; prints the full token once.
    Create {
        #[arg(long)]
        company: i64,
        /// For people: trimmed, then 1 to 100 characters, no control
        /// characters (the dashboard's rule too).
        #[arg(long)]
        label: String,
        /// A test key (`svc_test_`): test pools, simulated calls, and it
        /// never sees live verifications (nor a live key its).
        #[arg(long)]
        test: bool,
    },
    /// List keys (prefix, label, company, limit, last use, revocation).
    List {
        #[arg(long)]
        company: Option<i64>,
    },
    /// Revoke a key by its 8-character prefix.
    Revoke { prefix: String },
    /// Set a key's limit in requests per sliding minute, or `default` (120).
    SetLimit { prefix: String, limit: String },
}

#[derive(Debug, Subcommand)]
pub enum UserCmd {
    /// Create a dashboard user of a company. The password is read from
    /// standard input (one line), never from the command line, where other
    /// users of the machine could see it.
    Create {
        #[arg(long)]
        company: i64,
        #[arg(long)]
        email: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum NumberCmd {
    /// Configured numbers with their pool, line and dedication.
    List,
    /// Dedicate a configured number to one company.
    Dedicate {
        number: String,
        #[arg(long)]
        company: i64,
    },
    /// Return a dedicated number to the shared pool.
    Undedicate { number: String },
    /// Each number's health: state, leases, completions, leases expired
    /// without a call, stray calls, last completion.
    Health,
    /// End a number's quarantine: it is issued again.
    Release { number: String },
}

/// The configuration file: `--config`, else `dialproof.toml` in the
/// working directory when there is one, else none (the built-in defaults).
pub fn config_path(args: &Args) -> Option<PathBuf> {
    args.config.clone().or_else(|| {
        let default = PathBuf::from("dialproof.toml");
        default.exists().then_some(default)
    })
}

/// Runs one operator command (`serve` is the runtime's, started by `main`).
pub fn run(args: Args) -> Result<()> {
    let config = Config::load(config_path(&args).as_deref())?;
    let admin = open_admin(&config.database_path())?;
    let out = Output { json: args.json };
    match args.command {
        Command::Serve(_) | Command::Check | Command::Ha => {
            anyhow::bail!("`serve` and `check` are the runtime's, not operator commands")
        }
        Command::Company(c) => company(&admin, c, &out),
        Command::Key(k) => keys::run(&admin, k, &out),
        Command::Number(n) => number(&admin, &config, n, &out),
        Command::User(u) => user(&admin, u, &out),
        Command::Delivery(d) => delivery::run(&admin, d, out.json, now()),
        Command::Rejection(r) => rejection::run(&admin, r, out.json),
    }
}

fn open_admin(db: &Path) -> Result<Admin> {
    if let Some(dir) = db.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Admin::open(db).map_err(|e| anyhow::anyhow!("opening {}: {e}", db.display()))
}

struct Output {
    json: bool,
}

impl Output {
    fn print(&self, value: serde_json::Value, text: impl FnOnce() -> String) {
        if self.json {
            println!("{value}");
        } else {
            println!("{}", text());
        }
    }
}

fn now() -> UnixMillis {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    UnixMillis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn storage<T>(r: Result<T, dialproof_storage::StorageError>) -> Result<T> {
    r.map_err(|e| anyhow::anyhow!("{e}"))
}

fn company_json(c: &CompanyRow) -> serde_json::Value {
    json!({
        "id": c.id,
        "name": c.name,
        "created_at": c.created_at.to_rfc3339(),
        "send_failed_webhooks": c.send_failed_webhooks,
        "dev_webhook_urls": c.dev_webhook_urls,
        "test_pool_size": c.test_pool_size.unwrap_or(dialproof_engine::test_pool::POOL_SIZE_DEFAULT),
        "secret_rotated_grace_until": c.previous_secret_valid_until.map(UnixMillis::to_rfc3339),
    })
}

/// `company create`: the secret is shown this once.
fn company_create(admin: &Admin, name: &str, out: &Output) -> Result<()> {
    let companies::NewCompany {
        row: c,
        webhook_secret: secret,
    } = companies::create(admin, name, now())?;
    let mut v = company_json(&c);
    v["webhook_secret"] = json!(secret);
    out.print(v, || {
        format!(
            "company {} created: {}\nwebhook secret (shown once): {secret}",
            c.id, c.name
        )
    });
    Ok(())
}

/// `company list`: a table, or the JSON array.
fn company_list(admin: &Admin, out: &Output) -> Result<()> {
    let all = storage(admin.list_companies())?;
    out.print(
        json!(all.iter().map(company_json).collect::<Vec<_>>()),
        || {
            let mut s = format!(
                "{:>6}  {:<30}  {:<6}  {}",
                "ID", "NAME", "FAILED", "DEV URLS"
            );
            for c in &all {
                s.push_str(&format!(
                    "\n{:>6}  {:<30}  {:<6}  {}",
                    c.id,
                    c.name,
                    if c.send_failed_webhooks { "on" } else { "off" },
                    c.dev_webhook_urls.join(" ")
                ));
            }
            s
        },
    );
    Ok(())
}

fn company(admin: &Admin, cmd: CompanyCmd, out: &Output) -> Result<()> {
    match cmd {
        CompanyCmd::Create { name } => company_create(admin, &name, out)?,
        CompanyCmd::List => company_list(admin, out)?,
        CompanyCmd::RotateSecret { id } => {
            let companies::Rotated {
                secret,
                previous_valid_until: until,
            } = storage(companies::rotate_secret(admin, id, now()))?;
            out.print(
                json!({"id": id, "webhook_secret": secret, "previous_valid_until": until.to_rfc3339()}),
                || {
                    format!(
                        "new webhook secret for company {id} (shown once): {secret}\n\
                         the previous secret also signs until {until}"
                    )
                },
            );
        }
        CompanyCmd::FailedWebhooks { id, state } => {
            let on = state == "on";
            storage(admin.set_send_failed_webhooks(id, on))?;
            out.print(json!({"id": id, "send_failed_webhooks": on}), || {
                format!("company {id}: verification.failed webhooks {state}")
            });
        }
        CompanyCmd::DevUrls { id, urls, clear: _ } => {
            let urls = urls
                .iter()
                .map(|u| companies::dev_url(u).map(str::to_owned))
                .collect::<Result<Vec<_>, _>>()?;
            storage(admin.set_dev_webhook_urls(id, urls.clone()))?;
            print_dev_urls(out, id, &urls, "set");
        }
        CompanyCmd::DevUrl(cmd) => dev_url(admin, out, cmd)?,
        CompanyCmd::TestPoolSize { id, size } => {
            let size = companies::parse_test_pool_size(&size).map_err(anyhow::Error::msg)?;
            storage(admin.set_test_pool_size(id, size))?;
            let shown = size.unwrap_or(dialproof_engine::test_pool::POOL_SIZE_DEFAULT);
            out.print(json!({"id": id, "test_pool_size": shown}), || {
                format!("company {id}: {shown} numbers in each test pool")
            });
        }
    }
    Ok(())
}

fn dev_url(admin: &Admin, out: &Output, cmd: DevUrlCmd) -> Result<()> {
    match cmd {
        DevUrlCmd::List { id } => {
            let company =
                storage(admin.company(id))?.ok_or_else(|| anyhow::anyhow!("no company {id}"))?;
            print_dev_urls(out, id, &company.dev_webhook_urls, "are");
        }
        DevUrlCmd::Add { id, url } => {
            let url = companies::dev_url(&url)?;
            let urls = storage(admin.add_dev_webhook_url(id, url))?;
            print_dev_urls(out, id, &urls, "now");
        }
        DevUrlCmd::Remove { id, url } => {
            let urls = storage(admin.remove_dev_webhook_url(id, &url))?;
            print_dev_urls(out, id, &urls, "now");
        }
    }
    Ok(())
}

fn print_dev_urls(out: &Output, id: i64, urls: &[String], verb: &str) {
    out.print(json!({"id": id, "dev_webhook_urls": urls}), || {
        if urls.is_empty() {
            format!("company {id}: no development URLs")
        } else {
            format!("company {id}: development URLs {verb}: {}", urls.join(" "))
        }
    });
}

/// `number list`: every configured number with its line and owner.
fn number_list(
    admin: &Admin,
    config: &Config,
    configured: &[ConfiguredNumber],
    out: &Output,
) -> Result<()> {
    let dedicated: std::collections::HashMap<String, i64> =
        storage(admin.list_dedicated_numbers())?
            .into_iter()
            .collect();
    let rows: Vec<serde_json::Value> = configured
        .iter()
        .map(|n| {
            let line = &config.lines[n.line as usize].name;
            json!({
                "number": n.number,
                "pool": n.pool.as_str(),
                "line": line,
                "active": n.active,
                "dedicated_to": dedicated.get(&n.number).copied().or(n.dedicated_to),
            })
        })
        .collect();
    out.print(json!(rows), || {
        let mut s = format!(
            "{:<17}  {:<13}  {:<16}  {:<6}  {}",
            "NUMBER", "POOL", "LINE", "ACTIVE", "DEDICATED TO"
        );
        for r in &rows {
            s.push_str(&format!(
                "\n{:<17}  {:<13}  {:<16}  {:<6}  {}",
                r["number"].as_str().unwrap_or(""),
                r["pool"].as_str().unwrap_or(""),
                r["line"].as_str().unwrap_or(""),
                r["active"],
                r["dedicated_to"]
                    .as_i64()
                    .map(|c| format!("company {c}"))
                    .unwrap_or("shared".into()),
            ));
        }
        s
    });
    Ok(())
}

fn number(admin: &Admin, config: &Config, cmd: NumberCmd, out: &Output) -> Result<()> {
    let configured = config.numbers()?;
    match cmd {
        NumberCmd::List => number_list(admin, config, &configured, out)?,
        NumberCmd::Dedicate { number, company } => {
            if !configured.iter().any(|n| n.number == number) {
                bail!("{number} is not a configured number");
            }
            storage(admin.dedicate_number(&number, company, now()))?;
            out.print(json!({"number": number, "dedicated_to": company}), || {
                format!("{number} dedicated to company {company}")
            });
        }
        NumberCmd::Health => number_health::health(admin, &configured, out)?,
        NumberCmd::Release { number } => number_health::release(admin, &number, out)?,
        NumberCmd::Undedicate { number } => {
            if !storage(admin.undedicate_number(&number))? {
                bail!("{number} is not dedicated");
            }
            out.print(json!({"number": number, "dedicated_to": null}), || {
                format!("{number} returned to the shared pool")
            });
        }
    }
    Ok(())
}

fn user(admin: &Admin, cmd: UserCmd, out: &Output) -> Result<()> {
    match cmd {
        UserCmd::Create { company, email } => {
            // The email first: a bad one is refused before the password is
            // read.
            let email = users::Email::parse(&email)?;
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("reading the password from standard input")?;
            let password = line.trim_end_matches(['\r', '\n']);
            let u = users::create(admin, company, &email, password, now())?;
            out.print(
                json!({"id": u.id, "company_id": u.company_id, "email": u.email}),
                || format!("user {} created for company {}", u.email, u.company_id),
            );
        }
    }
    Ok(())
}
