//! Webhooks over https: the sender resolves the name itself and connects to
//! the vetted address, while TLS SNI (and `Host`) stay the URL's host name;
//! the receiver's certificate is verified, so an untrusted one is a failed
//! attempt, never a delivery.
//!
//! The name is answered by `/etc/hosts` in a network namespace of the
//! test's own (`crate::support::netns`), where the service, the trap and the test's
//! clients all run; it is marked as a development URL, since it points at
//! loopback.
//!
//! Not for: plain-HTTP receivers (the other `webhooks` modules).

use crate::support::netns::Netns;
use crate::support::webhooks::*;
use crate::support::*;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A TLS listener with a self-signed certificate for `name` that records
/// the SNI of every handshake (none can succeed: nobody trusts it).
fn tls_trap(name: &str) -> (u16, Arc<Mutex<Vec<String>>>) {
    let generated = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
    let cert = CertificateDer::from(generated.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.key_pair.serialize_der()));
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let snis = Arc::new(Mutex::new(Vec::new()));
    let seen = snis.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { continue };
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
            let mut conn = rustls::ServerConnection::new(config.clone()).unwrap();
            // Drive the handshake until the client gives up on our
            // certificate; the ClientHello (and its SNI) comes first.
            while conn.is_handshaking() {
                if conn.complete_io(&mut tcp).is_err() {
                    break;
                }
            }
            if let Some(sni) = conn.server_name() {
                seen.lock().unwrap().push(sni.to_owned());
            }
        }
    });
    (port, snis)
}

/// The test's name, for [`Netns::enter`].
const TEST: &str = concat!(
    module_path!(),
    "::",
    "https_uses_the_url_host_for_sni_and_verifies_the_certificate"
);

#[test]
fn https_uses_the_url_host_for_sni_and_verifies_the_certificate() {
    let hosts = "127.0.0.1 localhost\n127.0.0.1 selfsigned.test\n";
    if Netns::enter(TEST, hosts).is_none() {
        return;
    }
    let (port, snis) = tls_trap("selfsigned.test");
    let base = format!("https://selfsigned.test:{port}");

    let (s, clock) = Server::start_virtual(&format!("{FAST_RETRIES}{}", pools(10, 0)));
    let company = s.create_company("acme");
    s.cli(&["company", "dev-urls", &company.to_string(), &base]);
    let token = s.create_key(company);
    let v = s.create_ok(
        &token,
        &json!({"phone": RU_PHONE, "webhook_url": format!("{base}/hook"), "ttl_seconds": 30}),
    );
    let id = v["verification_id"].as_str().unwrap().to_owned();

    let d = expire_until_dead(&s, &clock, &id);
    for a in d["attempts"].as_array().unwrap() {
        assert!(a["http_status"].is_null(), "{a}");
        let error = a["error"].as_str().unwrap();
        assert!(error.to_lowercase().contains("certificate"), "{error}");
    }
    let snis = snis.lock().unwrap().clone();
    assert_eq!(snis.len(), 3, "one handshake per attempt: {snis:?}");
    assert!(snis.iter().all(|n| n == "selfsigned.test"), "{snis:?}");
}
