//! Renderings of a [`Report`]: the text table, JSON and JUnit XML.

use std::fmt::Write as _;

use crate::{Report, Verdict};

fn cell(s: &str) -> String {
    s.replace('|', "/").replace('\n', " ")
}

/// The report as a Markdown table (verdict, case, clause, what was sent, what the RFC
/// requires, what the peer did, and why for anything but PASS) followed by the summary line.
pub fn table(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "softrnic conform: peer {} ({}, {})",
        r.peer,
        r.app.name(),
        r.llp.describe()
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| verdict | case | clause | sent | RFC requires | peer did |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for c in &r.results {
        let observed = if c.reason.is_empty() {
            cell(&c.observed)
        } else {
            format!("{} — {}", cell(&c.observed), cell(&c.reason))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            c.verdict,
            c.id,
            cell(&c.clause),
            cell(&c.sent),
            cell(&c.requires),
            observed
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "{}", r.summary());
    s
}

/// The report as one JSON object: peer, application, the number of connections opened,
/// summary counts and every result.
pub fn json(r: &Report) -> String {
    let v = serde_json::json!({
        "peer": r.peer,
        "app": r.app,
        "llp": r.llp,
        "connections": r.connections.len(),
        "associations": r.associations,
        "summary": {
            "cases": r.results.len(),
            "pass": r.count(Verdict::Pass),
            "fail": r.count(Verdict::Fail),
            "deviation": r.count(Verdict::Deviation),
            "not_applicable": r.count(Verdict::NotApplicable),
        },
        "results": r.results,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// The report as JUnit XML: one test case per case (class name: the clause). FAIL is a
/// `failure`, DEVIATION a `failure` of type `DEVIATION` (the peer does not conform, in a
/// known way), N/A `skipped`.
pub fn junit(r: &Report) -> String {
    let mut s = String::new();
    let failures = r.count(Verdict::Fail) + r.count(Verdict::Deviation);
    let secs = |ms: u64| ms as f64 / 1000.0;
    let total: u64 = r.results.iter().map(|c| c.millis).sum();
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(
        s,
        r#"<testsuites name="softrnic conform" tests="{}" failures="{}" skipped="{}" time="{:.3}">"#,
        r.results.len(),
        failures,
        r.count(Verdict::NotApplicable),
        secs(total)
    );
    let _ = writeln!(
        s,
        r#"  <testsuite name="{}" tests="{}" failures="{}" errors="0" skipped="{}" time="{:.3}">"#,
        xml(&format!("conform {} ({})", r.peer, r.app.name())),
        r.results.len(),
        failures,
        r.count(Verdict::NotApplicable),
        secs(total)
    );
    for c in &r.results {
        let _ = writeln!(
            s,
            r#"    <testcase classname="{}" name="{}" time="{:.3}">"#,
            xml(&c.clause),
            xml(&c.id),
            secs(c.millis)
        );
        let detail = format!(
            "sent: {}\nrequires: {}\npeer did: {}\n",
            c.sent, c.requires, c.observed
        );
        match c.verdict {
            Verdict::Pass => {}
            Verdict::Fail | Verdict::Deviation => {
                let _ = writeln!(
                    s,
                    r#"      <failure type="{}" message="{}">{}</failure>"#,
                    c.verdict,
                    xml(&c.reason),
                    xml(&detail)
                );
            }
            Verdict::NotApplicable => {
                let _ = writeln!(s, r#"      <skipped message="{}"/>"#, xml(&c.reason));
            }
        }
        let _ = writeln!(s, "      <system-out>{}</system-out>", xml(&detail));
        let _ = writeln!(s, "    </testcase>");
    }
    let _ = writeln!(s, "  </testsuite>");
    let _ = writeln!(s, "</testsuites>");
    s
}
