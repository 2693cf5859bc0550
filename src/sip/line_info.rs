//! Each line's configuration resolved for the call path ([`LineInfo`]):
//! the provider's addresses, the region, the reject code, where the dialled
//! number is read and the Contact token. Host names are resolved here, at
//! start or reload, never on the call path.
//!
//! Not for: the file's syntax and its checks (`crate::shared::config`), or
//! a line's up/down state (`super::state`).

use crate::shared::config::{Config, LineMode};
use anyhow::{Context, Result};
use dialproof_engine::caller_evidence::CallerIdTrust;
use dialproof_engine::lease::LineId;
use dialproof_engine::sip::number::Region;
use dialproof_engine::sip::route::{contact_user, CalledFrom, LineRoute};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

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
    /// The least caller ID trust that completes a verification.
    pub min_caller_id_trust: CallerIdTrust,
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
                min_caller_id_trust: CallerIdTrust::parse_minimum(&l.min_caller_id_trust)
                    .with_context(|| format!("line {:?}: min_caller_id_trust", l.name))?,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::config::Config;

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
            "[[lines]]\nname = \"a\"\nmode = \"always_up\"\nmin_caller_id_trust = \"failed\"\n",
            "[[lines]]\nname = \"a\"\nmode = \"always_up\"\nmin_caller_id_trust = \"high\"\n",
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
