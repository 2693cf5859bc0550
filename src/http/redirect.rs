//! The plain-HTTP listener's only answer: `301 Moved Permanently` to the
//! same path and query on HTTPS.
//!
//! The host is taken from the `Host` header only when it is a plain host name
//! or address (letters, digits, dots, hyphens, or a bracketed IPv6 literal);
//! anything else would let a client make us emit a redirect to a host of its
//! choosing with odd bytes in it, so it falls back to `localhost`.
//!
//! Not for: anything else on port 80; the API is HTTPS only.

use crate::http::{Request, Response};

pub fn redirect(req: &Request, https_port: u16) -> Response {
    let host = req
        .header("host")
        .and_then(host_without_port)
        .unwrap_or("localhost");
    let port = if https_port == 443 {
        String::new()
    } else {
        format!(":{https_port}")
    };
    let mut location = format!("https://{host}{port}{}", req.path());
    if let Some(q) = req.query() {
        location.push('?');
        location.push_str(q);
    }
    Response::json(301, "{}").with_header("Location", location)
}

fn host_without_port(h: &str) -> Option<&str> {
    let host = if let Some(rest) = h.strip_prefix('[') {
        let end = rest.find(']')?;
        &h[..end + 2]
    } else {
        h.split(':').next()?
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':');
    (!host.is_empty() && host.len() <= 253 && host.chars().all(ok)).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(host: Option<&str>, path: &str, query: Option<&str>) -> Request {
        let target = match query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_owned(),
        };
        let headers: Vec<(&str, &str)> = host.map(|h| ("Host", h)).into_iter().collect();
        Request::parsed("GET", &target, &headers)
    }

    fn location(r: &Response) -> &str {
        &r.headers.iter().find(|(n, _)| *n == "Location").unwrap().1
    }

    #[test]
    fn redirects_to_same_path_on_https() {
        let r = redirect(
            &req(Some("example.com:8080"), "/api/v1/x/", Some("a=1")),
            8443,
        );
        assert_eq!(r.status, 301);
        assert_eq!(location(&r), "https://example.com:8443/api/v1/x/?a=1");
        let r = redirect(&req(Some("example.com"), "/", None), 443);
        assert_eq!(location(&r), "https://example.com/");
        let r = redirect(&req(Some("[::1]:80"), "/", None), 8443);
        assert_eq!(location(&r), "https://[::1]:8443/");
    }

    #[test]
    fn odd_hosts_fall_back_to_localhost() {
        for h in ["evil.com/x", "a b", "evil.com@x", ""] {
            let r = redirect(&req(Some(h), "/", None), 8443);
            assert_eq!(location(&r), "https://localhost:8443/", "{h}");
        }
        let r = redirect(&req(None, "/", None), 8443);
        assert_eq!(location(&r), "https://localhost:8443/");
    }
}
