//! TLS client settings (rustls with ring, as the service uses) and a
//! blocking connect: trust the certificate the service generated, a given
//! set of certificates, or with `Trust::Insecure` any certificate at all.
//!
//! Not for: HTTP over the connection (see [`crate::client`]), or the load
//! generator's non-blocking sockets (it takes only the settings from here).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A blocking TLS connection.
pub type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// Whom the client trusts.
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// The certificates in this PEM file (at least one).
    CaFile(&'a Path),
    /// These certificates (none: nothing verifies).
    Roots(&'a [CertificateDer<'static>]),
    /// Any certificate; the handshake's signatures are still checked.
    Insecure,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// The certificates of a PEM file.
pub fn certificates_in(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let pem = std::fs::read(path)
        .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
    rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("parsing {}: {e}", path.display())))
}

/// Client settings trusting `trust`, with the safe default TLS versions.
pub fn client_config(trust: Trust<'_>) -> io::Result<Arc<ClientConfig>> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS protocol versions: {e}")))?;
    let roots = |certs: &[CertificateDer<'static>]| -> io::Result<rustls::RootCertStore> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in certs {
            roots
                .add(cert.clone())
                .map_err(|e| invalid(format!("adding a root certificate: {e}")))?;
        }
        Ok(roots)
    };
    let config = match trust {
        Trust::CaFile(path) => {
            let certs = certificates_in(path)?;
            if certs.is_empty() {
                return Err(invalid(format!("no certificate in {}", path.display())));
            }
            builder.with_root_certificates(roots(&certs)?)
        }
        Trust::Roots(certs) => builder.with_root_certificates(roots(certs)?),
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider()))),
    };
    Ok(Arc::new(config.with_no_client_auth()))
}

/// A TCP connection with read and write timeouts of `io_timeout` (also the
/// connect's bound) and Nagle off.
pub fn tcp(addr: SocketAddr, io_timeout: Duration) -> io::Result<TcpStream> {
    let tcp = TcpStream::connect_timeout(&addr, io_timeout)?;
    tcp.set_read_timeout(Some(io_timeout))?;
    tcp.set_write_timeout(Some(io_timeout))?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// A TLS client connection to `addr` checked against `server_name` (also
/// the SNI); the handshake happens on the first read or write.
pub fn connect(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    server_name: &str,
    io_timeout: Duration,
) -> io::Result<TlsStream> {
    let name = ServerName::try_from(server_name.to_owned())
        .map_err(|e| invalid(format!("server name {server_name:?}: {e}")))?;
    let conn = rustls::ClientConnection::new(config.clone(), name).map_err(io::Error::other)?;
    Ok(rustls::StreamOwned::new(conn, tcp(addr, io_timeout)?))
}

/// `Trust::Insecure`: any certificate is accepted, but the handshake's
/// signatures are still checked, so the session is a real TLS session with
/// whoever holds the certificate's key.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
