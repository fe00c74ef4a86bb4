//! The association's log: every event is emitted inside the association's span, which names
//! its local and peer addresses, SCTP ports and both verification tags; setup, retransmission
//! (T3-rtx, fast), path state changes, primary changes and ABORT are events at their levels.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use sctp::{AssociationConfig, Event};

/// A writer into a shared buffer, for the formatting subscriber.
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` under the tools' formatting subscriber at `debug` (no time, no colour) and
/// returns its result and the log lines.
fn logged<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let w = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .without_time()
        .with_writer(move || Capture(w.clone()))
        .finish();
    let r = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    (r, text.lines().map(str::to_string).collect())
}

/// One log line: its level, the fields of its `sctp` span and its message with fields.
#[derive(Debug)]
struct Line {
    level: String,
    span: Option<HashMap<String, String>>,
    text: String,
}

fn parse(line: &str) -> Line {
    let line = line.trim_start();
    let (level, rest) = line.split_once(' ').unwrap_or((line, ""));
    let rest = rest.trim_start();
    let span = rest
        .strip_prefix("sctp{")
        .and_then(|s| s.split_once("}:"))
        .map(|(fields, _)| {
            let fields: Vec<(String, String)> = fields
                .split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let named: HashMap<String, String> = fields.iter().cloned().collect();
            // Each field is named once (no restart happens in these runs).
            assert_eq!(named.len(), fields.len(), "a span field twice: {line}");
            named
        });
    Line {
        level: level.to_string(),
        span,
        text: rest.to_string(),
    }
}

/// The lines saying `what` inside the span whose `vtag` is `vtag`.
fn in_span<'a>(lines: &'a [Line], vtag: u32, what: &str) -> Vec<&'a Line> {
    lines
        .iter()
        .filter(|l| l.text.contains(what))
        .filter(|l| {
            l.span
                .as_ref()
                .is_some_and(|s| s.get("vtag") == Some(&vtag.to_string()))
        })
        .collect()
}

/// Setup, T3-rtx, SCTP-PF's potentially failed path and the failover to the alternate
/// primary, then a user ABORT: each is logged inside the association's span, which names
/// both ends' addresses, ports and tags.
#[test]
fn association_events_are_logged_in_its_span_with_addresses_ports_and_tags() {
    let ((a_tag, b_tag), lines) = logged(|| {
        let cfg = AssociationConfig {
            pf_max_retrans: Some(0),
            ..AssociationConfig::default()
        };
        let mut p = Pair::connected(23, cfg);
        p.run_for(Duration::from_secs(1));
        let mut bulk = Bulk::new(5_000, 1000, p.now);
        p.run_until(p.now + Duration::from_millis(100), |p| bulk.step(p));
        p.down = vec![1];
        assert!(p.run_until(p.now + Duration::from_secs(60), |p| bulk.step(p)));
        let tags = (p.assoc_a().local_tag(), p.assoc_b().local_tag());
        p.assoc_a().abort();
        p.run_for(Duration::from_millis(100));
        assert!(
            p.events_b
                .iter()
                .any(|(_, e)| matches!(e, Event::Aborted { .. }))
        );
        tags
    });
    let lines: Vec<Line> = lines.iter().map(|l| parse(l)).collect();
    // Every line of the association engine is inside an association's span.
    for l in &lines {
        assert!(l.span.is_some(), "outside any association span: {l:?}");
    }

    let up = in_span(&lines, a_tag, "SCTP association established");
    assert_eq!(up.len(), 1, "{lines:#?}");
    assert_eq!(up[0].level, "INFO");
    let a = up[0].span.as_ref().unwrap();
    assert_eq!(a["local"], "10.0.1.1,10.0.2.1");
    assert_eq!(a["port"], PORT_A.to_string());
    assert_eq!(a["peer"], "10.0.1.2");
    assert_eq!(a["peer_port"], PORT_B.to_string());
    assert_eq!(a["peer_vtag"], b_tag.to_string());
    assert_eq!(a["peer_addrs"], "10.0.1.2,10.0.2.2");
    let init = in_span(&lines, a_tag, "SCTP INIT sent");
    assert!(init.iter().all(|l| l.level == "DEBUG") && !init.is_empty());

    let up = in_span(&lines, b_tag, "SCTP association established");
    assert_eq!(up.len(), 1, "{lines:#?}");
    let b = up[0].span.as_ref().unwrap();
    assert_eq!(b["local"], "10.0.1.2,10.0.2.2");
    assert_eq!(b["port"], PORT_B.to_string());
    assert_eq!(b["peer"], "10.0.1.1");
    assert_eq!(b["peer_port"], PORT_A.to_string());
    assert_eq!(b["peer_vtag"], a_tag.to_string());
    assert_eq!(b["peer_addrs"], "10.0.1.1,10.0.2.1");

    let t3 = in_span(&lines, a_tag, "SCTP T3-rtx timeout");
    assert!(!t3.is_empty() && t3.iter().all(|l| l.level == "DEBUG"));
    assert!(t3[0].text.contains("remote=10.0.1.2"), "{:?}", t3[0]);
    let pf = in_span(&lines, a_tag, "SCTP path potentially failed");
    assert_eq!(pf.len(), 1, "{lines:#?}");
    assert_eq!(pf[0].level, "INFO");
    assert!(pf[0].text.contains("remote=10.0.1.2"));
    let primary = in_span(&lines, a_tag, "SCTP primary path changed");
    assert!(primary.iter().any(|l| l.text.contains("remote=10.0.2.2")));
    let active = in_span(&lines, a_tag, "SCTP path active");
    assert!(active.iter().any(|l| l.text.contains("remote=10.0.2.2")));

    let user = in_span(&lines, a_tag, "SCTP association aborted by the user");
    assert_eq!(user.len(), 1);
    assert_eq!(user[0].level, "INFO");
    let peer = in_span(&lines, b_tag, "SCTP association aborted");
    assert_eq!(peer.len(), 1, "{lines:#?}");
    assert_eq!(peer[0].level, "WARN");
    assert!(peer[0].text.contains("Peer"), "{:?}", peer[0]);
}

/// Fast retransmission under random loss is a `debug` event in the sender's span.
#[test]
fn fast_retransmit_is_logged_in_the_senders_span() {
    let (a_tag, lines) = logged(|| {
        let mut p = Pair::connected(31, AssociationConfig::default());
        p.loss = 0.02;
        let mut bulk = Bulk::new(5_000, 1000, p.now);
        assert!(p.run_until(p.now + Duration::from_secs(120), |p| bulk.step(p)));
        assert!(p.assoc_a().stats().fast_retransmits > 0);
        p.assoc_a().local_tag()
    });
    let lines: Vec<Line> = lines.iter().map(|l| parse(l)).collect();
    let fast = in_span(&lines, a_tag, "SCTP fast retransmit");
    assert!(!fast.is_empty(), "{lines:#?}");
    assert!(fast.iter().all(|l| l.level == "DEBUG"));
}
