//! A dashboard user as a browser without JavaScript would be: signs in
//! through the login form (its double-submit cookie and field), keeps the
//! session cookie, reads each page's form token from its HTML and posts
//! forms with it.
//!
//! Not for: the dashboard in a real browser (see [`super::browser`]).

use super::*;

pub const PASSWORD: &str = "correct horse battery staple";

/// `dialproof user create`, with the password on standard input.
pub fn create_user(server: &Server, company: i64, email: &str) {
    let company = company.to_string();
    let args = ["user", "create", "--company", &company, "--email", email];
    let out = server.cli_output_with_input(&args, &format!("{PASSWORD}\n"));
    assert!(out.status.success(), "user create: {out:?}");
}

/// `name=value` of a `Set-Cookie` header named `name`.
pub fn set_cookie(r: &Resp, name: &str) -> Option<String> {
    r.header_all("set-cookie")
        .into_iter()
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(|c| c.split(';').next().unwrap().trim().to_owned())
}

/// The value of the first `<input ... name="NAME" value="...">` in `html`.
pub fn hidden(html: &str, name: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{name}\" value=\""))?;
    let rest = &html[at + name.len() + 15..];
    Some(rest[..rest.find('"')?].to_owned())
}

pub fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish().into_bytes()
}

pub struct Dash<'a> {
    pub server: &'a Server,
    /// `dialproof_session=...`
    pub cookie: String,
}

/// GETs the login form and posts it; the raw answer and the form cookie.
pub fn post_login(server: &Server, email: &str, password: &str) -> Resp {
    let page = server.request("GET", "/dashboard/login/", &[], b"");
    assert_eq!(page.status, 200, "{}", page.text());
    let cookie = set_cookie(&page, "dialproof_login_csrf").expect("login form cookie");
    let token = hidden(&page.text(), "csrf").expect("login form token");
    server.request(
        "POST",
        "/dashboard/login/",
        &[
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", &cookie),
        ],
        &form(&[("csrf", &token), ("email", email), ("password", password)]),
    )
}

impl<'a> Dash<'a> {
    pub fn login(server: &'a Server, email: &str) -> Dash<'a> {
        let r = post_login(server, email, PASSWORD);
        assert_eq!(r.status, 303, "{}", r.text());
        let cookie = set_cookie(&r, "dialproof_session").expect("session cookie");
        Dash { server, cookie }
    }

    pub fn get(&self, path: &str) -> Resp {
        self.server
            .request("GET", path, &[("Cookie", &self.cookie)], b"")
    }

    /// The form token of the signed-in pages.
    pub fn csrf(&self) -> String {
        let page = self.get("/dashboard/keys/");
        assert_eq!(page.status, 200, "{}", page.text());
        hidden(&page.text(), "csrf").expect("form token")
    }

    pub fn post(&self, path: &str, pairs: &[(&str, &str)]) -> Resp {
        self.server.request(
            "POST",
            path,
            &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Cookie", &self.cookie),
            ],
            &form(pairs),
        )
    }

    /// Creates a key through the form; returns the answer (201 with the
    /// token on the page, or the refusal).
    pub fn create_key(&self, label: &str) -> Resp {
        let csrf = self.csrf();
        self.post("/api/dashboard/keys", &[("csrf", &csrf), ("label", label)])
    }
}

/// The full token shown once on a key creation's page.
pub fn shown_token(page: &Resp) -> String {
    let html = page.text();
    let at = html.find("svc_live_").expect("token on the page");
    html[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}
