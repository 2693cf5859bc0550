//! Where the load goes: the target URL resolved to one address, the
//! loopback rule (every address the tools send to or listen on must be
//! loopback unless `--allow-remote`), and the TLS client settings (the
//! kit's: trust a given certificate, or with `--insecure` accept any).
//!
//! Not for: connections themselves (see [`super::conn`]).

use anyhow::{bail, Context, Result};
use dialproof_kit::tls::client_config;
pub use dialproof_kit::tls::Trust;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// The HTTPS service under load.
#[derive(Debug, Clone)]
pub struct Target {
    /// The address connections go to (the first the host resolved to).
    pub addr: SocketAddr,
    /// The `Host` header: `host[:port]` as written in the URL.
    pub host_header: String,
    /// The name the certificate is checked against (and sent as SNI).
    pub server_name: ServerName<'static>,
    pub tls: Arc<ClientConfig>,
}

impl Target {
    /// Parses `https://host[:port]`, resolves it under the loopback rule
    /// and builds the TLS settings.
    pub fn new(
        url: &str,
        server_name: Option<&str>,
        trust: Trust<'_>,
        allow_remote: bool,
    ) -> Result<Target> {
        let parsed = url::Url::parse(url).with_context(|| format!("--target {url:?}"))?;
        if parsed.scheme() != "https" {
            bail!("--target must be an https:// URL (the API is HTTPS only)");
        }
        if parsed.path() != "/" || parsed.query().is_some() {
            bail!("--target is an origin only, like https://127.0.0.1:8443");
        }
        let host = parsed
            .host_str()
            .context("--target has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = parsed.port_or_known_default().unwrap_or(443);
        let spec = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let addr = resolve(&spec, "--target", allow_remote)?;
        let host_header = match parsed.port() {
            Some(p) => format!("{}:{p}", parsed.host_str().unwrap_or(&host)),
            None => parsed.host_str().unwrap_or(&host).to_owned(),
        };
        let name = server_name.unwrap_or(&host).to_owned();
        let server_name =
            ServerName::try_from(name.clone()).with_context(|| format!("server name {name:?}"))?;
        Ok(Target {
            addr,
            host_header,
            server_name,
            tls: client_config(trust)?,
        })
    }
}

/// Resolves `host:port`; refuses a name with any non-loopback address
/// unless `allow_remote`. `what` names the option in errors.
pub fn resolve(spec: &str, what: &str, allow_remote: bool) -> Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = spec
        .to_socket_addrs()
        .with_context(|| format!("{what} {spec:?} does not resolve"))?
        .collect();
    let Some(first) = addrs.first().copied() else {
        bail!("{what} {spec:?} resolves to no address");
    };
    check_loopback(&addrs, what, allow_remote)?;
    Ok(first)
}

/// Refuses any non-loopback address unless `allow_remote`.
pub fn check_loopback(addrs: &[SocketAddr], what: &str, allow_remote: bool) -> Result<()> {
    if allow_remote {
        return Ok(());
    }
    if let Some(a) = addrs.iter().find(|a| !a.ip().to_canonical().is_loopback()) {
        bail!(
            "{what} {a} is not a loopback address: this tool sends load to loopback only \
             unless --allow-remote is given"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_unless_allowed() {
        assert!(resolve("127.0.0.1:8443", "--target", false).is_ok());
        assert!(resolve("[::1]:8443", "--target", false).is_ok());
        assert!(resolve("localhost:8443", "--target", false).is_ok());
        let err = resolve("198.51.100.7:443", "--target", false).unwrap_err();
        assert!(err.to_string().contains("--allow-remote"), "{err}");
        assert!(resolve("198.51.100.7:443", "--target", true).is_ok());
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:1".parse().unwrap();
        assert!(check_loopback(&[mapped], "x", false).is_ok());
    }

    #[test]
    fn target_urls() {
        let t = Target::new("https://127.0.0.1:8443", None, Trust::Insecure, false).unwrap();
        assert_eq!(t.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(t.host_header, "127.0.0.1:8443");
        assert!(Target::new("http://127.0.0.1:8080", None, Trust::Insecure, false).is_err());
        assert!(Target::new("https://10.0.0.1", None, Trust::Insecure, false).is_err());
        assert!(Target::new("https://127.0.0.1/api", None, Trust::Insecure, false).is_err());
        let v6 = Target::new("https://[::1]:8443", None, Trust::Insecure, false).unwrap();
        assert_eq!(v6.addr, "[::1]:8443".parse().unwrap());
        let err = Target::new("https://198.51.100.7", None, Trust::Insecure, false).unwrap_err();
        assert!(err.to_string().contains("not a loopback address"), "{err}");
    }
}
