//! The HTTPS listener's certificate: the configured one, or a self-signed one
//! generated on first start and kept in the data directory.
//!
//! Not for: serving connections (see `crate::http::listener`).

use anyhow::{bail, Context, Result};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a generated certificate and key live, below the data directory.
pub fn self_signed_paths(data_dir: &Path) -> (PathBuf, PathBuf) {
    let dir = data_dir.join("tls");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// Returns (cert path, key path), generating a self-signed pair for
/// `localhost`, `127.0.0.1` and `::1` when none is configured and none was
/// generated before.
pub fn ensure_certificate(
    configured: Option<(PathBuf, PathBuf)>,
    data_dir: &Path,
) -> Result<(PathBuf, PathBuf)> {
    if let Some(pair) = configured {
        return Ok(pair);
    }
    let (cert_path, key_path) = self_signed_paths(data_dir);
    if cert_path.exists() && key_path.exists() {
        return Ok((cert_path, key_path));
    }
    let dir = cert_path
        .parent()
        .context("certificate path has a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    let generated = rcgen::generate_simple_self_signed(names)
        .context("generating a self-signed certificate")?;
    write_private(&key_path, generated.key_pair.serialize_pem().as_bytes())?;
    std::fs::write(&cert_path, generated.cert.pem())
        .with_context(|| format!("writing {}", cert_path.display()))?;
    tracing::info!(cert = %cert_path.display(), "generated a self-signed TLS certificate");
    Ok((cert_path, key_path))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// A rustls server configuration (ring provider, TLS 1.2 and 1.3, ALPN
/// `http/1.1` and `http/1.0`) from PEM files.
pub fn server_config(cert_path: &Path, key_path: &Path) -> Result<Arc<ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = {
        let pem =
            std::fs::read(cert_path).with_context(|| format!("reading {}", cert_path.display()))?;
        rustls_pemfile::certs(&mut pem.as_slice())
            .collect::<Result<_, _>>()
            .with_context(|| format!("parsing {}", cert_path.display()))?
    };
    if certs.is_empty() {
        bail!("{} holds no certificate", cert_path.display());
    }
    let key: PrivateKeyDer<'static> = {
        let pem =
            std::fs::read(key_path).with_context(|| format!("reading {}", key_path.display()))?;
        rustls_pemfile::private_key(&mut pem.as_slice())
            .with_context(|| format!("parsing {}", key_path.display()))?
            .with_context(|| format!("{} holds no private key", key_path.display()))?
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .with_context(|| {
            format!(
                "the key {} does not match the certificate {}",
                key_path.display(),
                cert_path.display()
            )
        })?;
    // HTTP/1.0 clients are served too (the HTTP layer closes after each
    // answer for them), so a client offering only `http/1.0` must not fail
    // the handshake.
    config.alpn_protocols = vec![b"http/1.1".to_vec(), b"http/1.0".to_vec()];
    Ok(Arc::new(config))
}
