//! The `READY` line a process prints on stdout once it listens: the
//! service's `READY https=ADDR [http=ADDR] [sip=ADDR] [ops=ADDR]`, or the
//! webhook receiver's `READY http://ADDR`. Whoever started the process reads
//! its addresses from here instead of guessing ports.
//!
//! Not for: waiting for the line (see [`crate::process`]).

use std::net::SocketAddr;

/// What a `READY` line starts with.
pub const PREFIX: &str = "READY ";

/// One `READY` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// The whole line, without its line end.
    pub line: String,
}

impl Ready {
    /// The line if it is a `READY` line.
    pub fn parse(line: &str) -> Option<Ready> {
        let line = line.trim_end_matches(['\r', '\n']);
        line.starts_with(PREFIX).then(|| Ready {
            line: line.to_owned(),
        })
    }

    /// The value of `key=` on the line, as written.
    pub fn field(&self, key: &str) -> Option<&str> {
        self.words()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
    }

    /// The address given as `key=ADDR`, if there is one and it parses.
    pub fn addr(&self, key: &str) -> Option<SocketAddr> {
        self.field(key)?.parse().ok()
    }

    /// The service's HTTPS API listener (`https=`).
    pub fn https(&self) -> Option<SocketAddr> {
        self.addr("https")
    }

    /// The plain-HTTP redirect listener (`http=`).
    pub fn http(&self) -> Option<SocketAddr> {
        self.addr("http")
    }

    /// The SIP listener (`sip=`).
    pub fn sip(&self) -> Option<SocketAddr> {
        self.addr("sip")
    }

    /// The operators' listener (`ops=`).
    pub fn ops(&self) -> Option<SocketAddr> {
        self.addr("ops")
    }

    /// The first word that is a URL (the webhook receiver's `http://ADDR`).
    pub fn url(&self) -> Option<&str> {
        self.words().find(|w| w.contains("://"))
    }

    fn words(&self) -> impl Iterator<Item = &str> {
        self.line.split_whitespace().skip(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_services_line_and_the_receivers_line() {
        let r =
            Ready::parse("READY https=127.0.0.1:8443 sip=127.0.0.1:5060 ops=[::1]:9\n").unwrap();
        assert_eq!(r.https(), Some("127.0.0.1:8443".parse().unwrap()));
        assert_eq!(r.sip(), Some("127.0.0.1:5060".parse().unwrap()));
        assert_eq!(r.ops(), Some("[::1]:9".parse().unwrap()));
        assert_eq!((r.http(), r.url()), (None, None));
        let r = Ready::parse("READY http://127.0.0.1:9000").unwrap();
        assert_eq!(r.url(), Some("http://127.0.0.1:9000"));
        assert_eq!(r.https(), None);
        assert!(Ready::parse("READYhttps=1").is_none());
        assert!(Ready::parse("[stdout] READY https=1").is_none());
    }

    #[test]
    fn a_key_matches_whole_names_only() {
        let r = Ready::parse("READY https=127.0.0.1:1 http=127.0.0.1:2").unwrap();
        assert_eq!(r.http(), Some("127.0.0.1:2".parse().unwrap()));
        assert_eq!(r.field("ht"), None);
    }
}
