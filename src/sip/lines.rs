//! The lines as SIP sees them, and their up/down state.
//!
//! [`LineInfo`] is a line's configuration resolved for the call path (the
//! provider's addresses, the region, the reject code). [`LineStates`] keeps
//! whether each line is up, by name, in the `App`, so that a lease table
//! rebuilt after a configuration reload starts from the lines' real state
//! (`leases::build_table` reads it) instead of "every line up".
//!
//! A line going down withholds its numbers at once (`set_line_up` on the
//! lease table) and fails its pending verifications (`Event::Fail`,
//! reason [`LINE_DOWN_REASON`]); their numbers stay withheld until the line
//! is back, since the table only issues numbers of lines that are up. The
//! pending verifications are found through the table's live leases, so a
//! create that leased a number of the line just before it went down, and
//! commits just after the failures were queued, stays pending and expires
//! normally: a window of a commit's length, accepted rather than locking
//! the create path.
//!
//! Not for: registering or pinging (see `driver`), or the configuration
//! file's syntax (see `crate::runtime::config`).

use crate::runtime::app::App;
use crate::runtime::config::{Config, LineConfig, LineMode};
use anyhow::{bail, Context, Result};
use dialproof_engine::lease::LineId;
use dialproof_engine::sip::number::Region;
use dialproof_engine::sip::route::{contact_user, CalledFrom, LineRoute};
use dialproof_engine::verification::Event;
use dialproof_storage::WriteOp;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// The failure reason of a verification whose line went down.
pub const LINE_DOWN_REASON: &str = "sip line down";
/// The final responses a line may reject calls with: 603 Decline (the
/// default), 486 Busy Here, 480 Temporarily Unavailable. None of them
/// answers the call, so the caller is never billed.
pub const REJECT_CODES: [u16; 3] = [603, 486, 480];
/// Longest registration expiry a line may ask for.
pub const REGISTER_EXPIRES_SECONDS_MAX: u32 = 86_400;

/// Checks a line's SIP settings at configuration load.
pub fn validate_line(line: &LineConfig) -> Result<()> {
    let name = &line.name;
    if !REJECT_CODES.contains(&line.reject_code) {
        bail!(
            "line {name:?}: reject_code must be one of {REJECT_CODES:?}, got {}",
            line.reject_code
        );
    }
    if Region::parse(&line.default_country).is_none() {
        bail!(
            "line {name:?}: default_country {:?} is not an ISO region with a numbering plan",
            line.default_country
        );
    }
    if CalledFrom::parse(&line.dialled_number_from).is_none() {
        bail!(
            "line {name:?}: dialled_number_from must be one of \"auto\", \"request_uri\", \
             \"to\", \"p_called_party_id\", got {:?}",
            line.dialled_number_from
        );
    }
    if line.register_expires_seconds == 0
        || line.register_expires_seconds > REGISTER_EXPIRES_SECONDS_MAX
    {
        bail!("line {name:?}: register_expires_seconds must be 1..={REGISTER_EXPIRES_SECONDS_MAX}");
    }
    if line.ping_interval_seconds == 0 || line.ping_failures_max == 0 {
        bail!("line {name:?}: ping_interval_seconds and ping_failures_max must be at least 1");
    }
    match line.mode {
        LineMode::AlwaysUp => {}
        LineMode::IpAuth => {
            if line.provider.is_none() {
                bail!("line {name:?}: mode \"ip_auth\" needs `provider` (host:port)");
            }
        }
        LineMode::Register => {
            if line.provider.is_none() || line.username.is_none() || line.password.is_none() {
                bail!(
                    "line {name:?}: mode \"register\" needs `provider`, `username` and `password`"
                );
            }
        }
    }
    if let Some(p) = &line.provider {
        if dialproof_engine::sip::message::split_host_port(p).is_none_or(|(_, port)| port.is_none())
        {
            bail!("line {name:?}: provider must be host:port, got {p:?}");
        }
    }
    Ok(())
}

/// A line's settings resolved for the call path.
#[derive(Clone, Debug)]
pub struct LineInfo {
    pub id: LineId,
    pub name: String,
    pub mode: LineMode,
    /// The provider's resolved address (register/ip_auth lines).
    pub provider: Option<SocketAddr>,
    pub provider_host: Option<String>,
    /// Source IPs whose INVITEs this line accepts.
    pub trusted: Vec<IpAddr>,
    pub region: Region,
    pub reject_code: u16,
    pub trust_asserted_identity: bool,
    /// Where the dialled number of an INVITE is read.
    pub called_from: CalledFrom,
    /// The user of the Contact this line registers (never a number).
    pub contact_user: String,
    /// The registration user name, which a provider may route calls by.
    pub aor_user: Option<String>,
}

impl LineInfo {
    pub fn trusts(&self, ip: IpAddr) -> bool {
        self.trusted.contains(&ip)
    }

    /// This line as the engine's routing decision sees it.
    pub fn route(&self) -> LineRoute<'_, LineId> {
        LineRoute {
            line: self.id,
            region: self.region,
            called_from: self.called_from,
            contact_user: &self.contact_user,
            aor_user: self.aor_user.as_deref(),
        }
    }
}

/// Resolves every line's SIP settings (DNS for provider host names happens
/// here, at start or reload, never on the call path).
pub fn resolve_lines(config: &Config) -> Result<Vec<LineInfo>> {
    config
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let id = LineId::try_from(i).context("too many lines")?;
            let (provider, provider_host) = match &l.provider {
                Some(p) => {
                    let addr = p
                        .to_socket_addrs()
                        .with_context(|| format!("line {:?}: resolving provider {p}", l.name))?
                        .next()
                        .with_context(|| {
                            format!("line {:?}: provider {p} has no address", l.name)
                        })?;
                    let host = dialproof_engine::sip::message::split_host_port(p)
                        .map(|(h, _)| h)
                        .unwrap_or_else(|| p.clone());
                    (Some(addr), Some(host))
                }
                None => (None, None),
            };
            let mut trusted = l.provider_addresses.clone();
            if let Some(a) = provider {
                if !trusted.contains(&a.ip()) {
                    trusted.push(a.ip());
                }
            }
            let region = Region::parse(&l.default_country)
                .with_context(|| format!("line {:?}: default_country", l.name))?;
            Ok(LineInfo {
                id,
                name: l.name.clone(),
                mode: l.mode,
                provider,
                provider_host,
                trusted,
                region,
                reject_code: l.reject_code,
                trust_asserted_identity: l.trust_asserted_identity,
                called_from: CalledFrom::parse(&l.dialled_number_from)
                    .with_context(|| format!("line {:?}: dialled_number_from", l.name))?,
                contact_user: contact_user(&l.name),
                aor_user: (l.mode == LineMode::Register)
                    .then(|| l.username.clone())
                    .flatten(),
            })
        })
        .collect()
}

/// Each line's up/down state by name, plus the resolved lines, shared by the
/// driver, the call path and the control loop.
#[derive(Default)]
pub struct LineStates {
    /// Taken around every change and every re-application to a rebuilt
    /// table, so a change racing a rebuild is never lost.
    up: Mutex<HashMap<String, bool>>,
    lines: parking_lot::RwLock<Arc<Vec<LineInfo>>>,
}

impl LineStates {
    /// The state of every line whose state is known (for `build_table`).
    pub fn snapshot(&self) -> HashMap<String, bool> {
        self.up.lock().clone()
    }

    pub fn lines(&self) -> Arc<Vec<LineInfo>> {
        self.lines.read().clone()
    }

    /// Replaces the resolved lines (start and reload).
    pub fn set_lines(&self, lines: Vec<LineInfo>) {
        *self.lines.write() = Arc::new(lines);
    }

    /// After the lease table was rebuilt: applies every known state to it.
    pub fn reapply(&self, app: &App) {
        let up = self.up.lock();
        let config = app.config.read().clone();
        app.leases.with_table(|table| {
            for (name, state) in up.iter() {
                if let Some(i) = config.lines.iter().position(|l| &l.name == name) {
                    if let Ok(id) = LineId::try_from(i) {
                        table.set_line_up(id, *state);
                    }
                }
            }
        });
    }
}

/// Marks line `name` up or down. Going down with `fail_pending` also fails
/// every pending verification on the line. Called by the driver at start
/// (without failing anything) and on every change.
pub fn set_line_up(app: &Arc<App>, name: &str, up: bool, fail_pending: bool) {
    let states = &app.sip_lines;
    let mut guard = states.up.lock();
    guard.insert(name.to_owned(), up);
    let config = app.config.read().clone();
    let Some(index) = config.lines.iter().position(|l| l.name == name) else {
        return;
    };
    let Ok(line) = LineId::try_from(index) else {
        return;
    };
    // The leases of the line as it goes down, taken in the same look.
    let leases: Vec<(String, u32)> = app.leases.with_table(|table| {
        table.set_line_up(line, up);
        if up || !fail_pending {
            return Vec::new();
        }
        table
            .leases()
            .into_iter()
            .filter(|(number, _)| {
                table
                    .slot_of(number)
                    .is_some_and(|slot| table.line_of(slot) == line)
            })
            .collect()
    });
    drop(guard);
    if !fail_pending {
        tracing::info!(line = name, up, "sip line starts");
        return;
    }
    tracing::warn!(line = name, up, "sip line state changed");
    if up {
        return;
    }
    // Every live lease on the line: its verification cannot be completed
    // by a call any more, so it fails now rather than expire silently.
    let now = app.now();
    let mut failed = 0usize;
    for (number, generation) in leases {
        let logged = number.clone();
        let op = WriteOp::TransitionByNumber {
            dial_number: number.clone(),
            generation: Some(generation),
            event: Event::Fail {
                at: now,
                reason: LINE_DOWN_REASON.to_owned(),
            },
            // Its consequences are the commit consumer's; only a failure is
            // this line's to report.
            reply: Some(Box::new(move |r| {
                if let Err(e) = r {
                    tracing::error!(number = %logged, error = %e,
                        "failing a verification of a down line");
                }
            })),
        };
        match app.store.submit(op) {
            Ok(()) => failed += 1,
            Err(e) => tracing::error!(%number, error = %e, "failing a verification of a down line"),
        }
    }
    if failed > 0 {
        tracing::warn!(
            line = name,
            failed,
            "pending verifications failed: sip line down"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lines: &str) -> Result<Config> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            format!("[server]\nhttps_listen = \"127.0.0.1:0\"\n[sip]\nlisten = \"127.0.0.1:0\"\n{lines}"),
        )?;
        Config::load(Some(&path))
    }

    #[test]
    fn line_settings_are_checked_at_load() {
        let bad = [
            "[[lines]]\nname = \"a\"\nmode = \"register\"\nprovider = \"127.0.0.1:5070\"\n",
            "[[lines]]\nname = \"a\"\nmode = \"ip_auth\"\n",
            "[[lines]]\nname = \"a\"\nmode = \"always_up\"\nreject_code = 404\n",
            "[[lines]]\nname = \"a\"\nmode = \"always_up\"\ndefault_country = \"XX\"\n",
            "[[lines]]\nname = \"a\"\nmode = \"ip_auth\"\nprovider = \"no-port\"\n",
            "[[lines]]\nname = \"a\"\nmode = \"always_up\"\nregister_expires_seconds = 0\n",
        ];
        for text in bad {
            assert!(config(text).is_err(), "accepted: {text}");
        }
        let ok = config(
            "[[lines]]\nname = \"a\"\nmode = \"register\"\nprovider = \"127.0.0.1:5070\"\n\
             username = \"u\"\npassword = \"p\"\nreject_code = 486\nprovider_addresses = [\"10.0.0.9\"]\n\
             [[lines]]\nname = \"b\"\nmode = \"always_up\"\n",
        )
        .expect("valid");
        let lines = resolve_lines(&ok).expect("resolved");
        assert_eq!(lines[0].reject_code, 486);
        assert!(lines[0].trusts("10.0.0.9".parse().unwrap()));
        assert!(lines[0].trusts("127.0.0.1".parse().unwrap()));
        assert!(!lines[0].trusts("127.0.0.2".parse().unwrap()));
        assert_eq!(lines[0].provider, Some("127.0.0.1:5070".parse().unwrap()));
        // An always-up line without provider addresses trusts nobody.
        assert!(lines[1].trusted.is_empty());
        assert!(lines[1].region.is_russia());
    }

    #[test]
    fn the_default_config_takes_calls_from_loopback() {
        let c = Config::load(None).expect("default");
        assert_eq!(c.sip.as_ref().map(|s| s.listen.port()), Some(5060));
        let lines = resolve_lines(&c).expect("resolved");
        assert!(lines[0].trusts("127.0.0.1".parse().unwrap()));
        assert_eq!(lines[0].reject_code, 603);
    }
}
