//! The alert rules (tools/deploy/README.md): `promtool check rules`
//! accepts the file, and every series an alert's expression names is one a
//! running service exposes on /metrics, so no alert waits on a series that
//! never comes (a renamed metric, a typo).

use crate::support::*;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn rules_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/deploy/dialproof-alerts.yml")
}

#[test]
fn promtool_accepts_the_rules() {
    let out = Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(rules_file())
        .output()
        .expect("promtool (Debian's prometheus package; tools/test.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "promtool refused the rules:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("SUCCESS: 9 rules found"), "{text}");
}

/// Every `expr:` of the file (kept on one line each, as the file's header
/// says); the count must match the alerts, so a multi-line one fails here
/// instead of going unchecked.
fn expressions() -> Vec<String> {
    let text = std::fs::read_to_string(rules_file()).expect("rules file");
    let exprs: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr:"))
        .map(|e| e.trim().to_owned())
        .collect();
    let alerts = text
        .lines()
        .filter(|l| l.trim().starts_with("- alert:"))
        .count();
    assert_eq!(exprs.len(), alerts, "one single-line expr per alert");
    assert!(exprs
        .iter()
        .all(|e| !e.is_empty() && !e.starts_with(['|', '>'])));
    exprs
}

/// The series names of a PromQL expression: identifiers outside label
/// matchers, grouping clauses and ranges that are not a function, an
/// aggregation (followed by `(`) or a keyword.
fn series_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: [&str; 9] = [
        "and", "or", "unless", "by", "without", "on", "ignoring", "bool", "offset",
    ];
    let mut cleaned = String::new();
    let mut depth_brace = 0;
    let mut depth_square = 0;
    for c in expr.chars() {
        match c {
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_square += 1,
            ']' => depth_square -= 1,
            _ if depth_brace > 0 || depth_square > 0 => {}
            _ => cleaned.push(c),
        }
    }
    // Grouping labels: `by (a, b)` and the like.
    for kw in ["by", "without", "on", "ignoring"] {
        while let Some(i) = cleaned.find(&format!("{kw} (")) {
            let end = cleaned[i..].find(')').map_or(cleaned.len(), |j| i + j + 1);
            cleaned.replace_range(i..end, " ");
        }
    }
    let mut names = BTreeSet::new();
    let bytes = cleaned.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < bytes.len()
                && ((bytes[i] as char).is_ascii_alphanumeric()
                    || bytes[i] == b'_'
                    || bytes[i] == b':')
            {
                i += 1;
            }
            let word = &cleaned[start..i];
            let called = cleaned[i..].trim_start().starts_with('(');
            if !called && !KEYWORDS.contains(&word) {
                names.insert(word.to_owned());
            }
        } else if c.is_ascii_digit() || c == '.' {
            while i < bytes.len()
                && ((bytes[i] as char).is_ascii_alphanumeric() || bytes[i] == b'.')
            {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    names
}

#[test]
fn the_series_parser_finds_names_and_skips_the_rest() {
    let names = series_names(
        "sum by (pool) (rate(a_total{outcome=\"x\"}[5m])) > 0.1 * b and time() - c > 30",
    );
    assert_eq!(names, ["a_total", "b", "c"].map(str::to_owned).into());
}

/// The series names in an exposition: every sample's name.
fn exposed(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_alert_names_only_series_the_service_exposes() {
    // Every part an alert watches switched on: a line in `register` mode
    // (its registrar, the loopback discard port, never answers), the
    // replication heartbeat, the operators' listener.
    let extra = format!(
        "{}\n[[lines]]\nname = \"reg\"\nmode = \"register\"\nprovider = \"127.0.0.1:9\"\n\
         username = \"u\"\npassword = \"p\"\n\
         numbers = [{{ number = \"+74950009999\", pool = \"domestic\" }}]\n",
        pools(2, 1)
    );
    let (_server, ops) = start_with_ops_edited(&extra, |c| {
        c.replacen(
            "[storage]\n",
            "[storage]\nreplication = \"litestream\"\n",
            1,
        ) + "\n[sip]\nlisten = \"127.0.0.1:0\"\n"
    });
    let body = scrape_metrics(&ops);
    let exposed = exposed(&body);
    let mut missing = Vec::new();
    for expr in expressions() {
        let names = series_names(&expr);
        assert!(!names.is_empty(), "no series in {expr:?}");
        for name in names {
            if !exposed.contains(&name) {
                missing.push(format!("{name} (in {expr})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "alert expressions name series /metrics does not have:\n{}\nexposed:\n{}",
        missing.join("\n"),
        exposed.iter().cloned().collect::<Vec<_>>().join("\n")
    );
}
