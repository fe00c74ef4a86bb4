//! The initiator's first-FPDU hold (`QpConfig::first_fpdu_delay`), the interop quirk for
//! Linux siw 6.1, whose `siw_accept` sends the MPA Reply (RFC 5044 §7.1.2) before it moves
//! the socket to the QP receive path, so an FPDU arriving right after the Reply can sit
//! unread.

mod common;

use std::time::Duration;

use common::{Side, pattern};
use stack::mpa;
use stack::{RecvWr, SendWr, Setup};

const MS: Duration = Duration::from_millis(1);

/// The point `n` milliseconds into the test's time line.
fn at(n: u64) -> stack::Instant {
    stack::Instant::from_millis(n)
}

/// Runs MPA setup with the Reply arriving at 10 ms, posts a Send on the initiator and
/// returns it, ready to transmit.
fn after_reply(delay: Duration) -> (Side, Side) {
    let mut a = Side::new(1, Setup::Initiator(mpa::Config::default()), |c| {
        c.first_fpdu_delay = delay
    });
    let mut b = Side::new(2, Setup::Responder(mpa::Config::default()), |_| {});
    let req = a.eng.poll_transmit().expect("MPA Request").to_vec();
    a.eng.transmit_done(req.len());
    b.eng.handle_stream(stack::Instant::ZERO, &req);
    let rep = b.eng.poll_transmit().expect("MPA Reply").to_vec();
    b.eng.transmit_done(rep.len());
    a.eng.handle_stream(at(10), &rep);
    let src = a.mr(100);
    src.buf().write_at(0, &pattern(100, 3)).expect("fits");
    let dst = b.mr(100);
    b.eng
        .post_recv(RecvWr::new(1, vec![dst.sge(0, 100)]))
        .expect("post recv");
    a.eng
        .post_send(SendWr::send(1, vec![src.sge(0, 100)]))
        .expect("post send");
    (a, b)
}

/// RFC 5044 §7.1.2 (the initiator sends the first FPDU after the Reply) with the hold:
/// nothing leaves before Reply time + delay, the deadline is reported through
/// `poll_timeout`, and at the deadline the Send goes out unchanged and is delivered.
#[test]
fn rfc5044_7_1_2_first_fpdu_held_until_delay_after_reply() {
    let (mut a, mut b) = after_reply(50 * MS);
    assert!(a.eng.poll_transmit().is_none(), "first FPDU must be held");
    assert_eq!(a.eng.poll_timeout(), Some(at(60)));
    a.eng.handle_timeout(at(59));
    assert!(a.eng.poll_transmit().is_none(), "still held 1 ms early");
    a.eng.handle_timeout(at(60));
    assert_eq!(a.eng.poll_timeout(), None);
    let fpdu = a
        .eng
        .poll_transmit()
        .expect("released at the deadline")
        .to_vec();
    a.eng.transmit_done(fpdu.len());
    b.eng.handle_stream(at(60), &fpdu);
    let wcs = b.recv_wcs();
    assert_eq!(wcs.len(), 1);
    assert!(wcs[0].status.is_success());
    assert_eq!(wcs[0].byte_len, 100);
}

/// Without the quirk (the default) the first FPDU follows the Reply at once.
#[test]
fn rfc5044_7_1_2_no_hold_by_default() {
    let (mut a, _b) = after_reply(Duration::ZERO);
    assert!(a.eng.poll_transmit().is_some());
    assert_eq!(a.eng.poll_timeout(), None);
}
