//! Shared memory regions and re-registration (RDMA Verbs: Register Shared Memory Region,
//! Reregister Memory Region; ibverbs registers a range twice and has `ibv_rereg_mr`): the
//! peer's access follows the registration it names, a refused access leaves memory untouched,
//! and every refused verb changes nothing.

mod common;

use common::{Opts, Pair, pattern};
use stack::ddp::{DdpCode, TaggedCode};
use stack::rdmap::{ProtectionCode, TermCause};
use stack::{
    Access, Addressing, MemError, MrOptions, MwType, RegisteredBuf, Rereg, SendWr, WcStatus,
};

/// a RDMA Writes `data` to `to` of `stag` on b and pumps.
fn write(p: &mut Pair, stag: u32, to: u64, data: &[u8]) {
    let src = p.a.mr(data.len());
    src.buf().write_at(0, data).expect("fits");
    p.a.eng
        .post_send(SendWr::write(
            7,
            vec![src.sge(0, data.len() as u32)],
            stag,
            to,
        ))
        .expect("write");
    p.pump();
}

/// `n` bytes at `at` of a buffer.
fn bytes(buf: &RegisteredBuf, at: usize, n: usize) -> Vec<u8> {
    buf.to_vec()[at..at + n].to_vec()
}

fn rw() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE
}

/// A shared registration of a read-only region with write rights lets the peer write the
/// same bytes through the new STag; the original stays read-only (RFC 5040 §7.2: access
/// rights), and deregistering the original leaves the shared one working.
#[test]
fn verbs_shared_region_has_its_own_rights_over_the_same_memory() {
    let mut p = Pair::established(&Opts::default());
    let ro =
        p.b.mr_with(4096, MrOptions::new(Access::REMOTE_READ).zero_based());
    let shared =
        p.b.mem
            .register_shared(ro.stag(), p.b.pd, MrOptions::new(rw()).zero_based())
            .expect("shared");
    assert_ne!(shared.stag(), ro.stag());
    let data = pattern(1000, 9);
    write(&mut p, shared.stag(), 500, &data);
    assert!(p.a.send_wcs().iter().all(|w| w.status == WcStatus::Success));
    // The same bytes, seen through both registrations.
    assert_eq!(bytes(ro.buf(), 500, 1000), data);
    p.b.mem
        .deregister(ro.stag())
        .expect("deregister the original");
    write(&mut p, shared.stag(), 0, &[1, 2, 3]);
    assert!(p.a.send_wcs().iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(bytes(shared.buf(), 0, 3), [1, 2, 3]);
    // The original STag is gone: Invalid STag (RFC 5041 §7.2).
    write(&mut p, ro.stag(), 0, &[9]);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(
        t.cause,
        TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag))
    );
    assert_eq!(bytes(shared.buf(), 0, 3), [1, 2, 3]);
}

/// RFC 5040 §7.2 through a shared registration: the read-only original refuses the Write
/// and the memory behind both registrations stays untouched.
#[test]
fn rfc5040_7_2_write_through_the_read_only_original_is_refused() {
    let mut p = Pair::established(&Opts::default());
    let ro = p.b.mr_with(4096, MrOptions::new(Access::REMOTE_READ));
    p.b.mem
        .register_shared(ro.stag(), p.b.pd, MrOptions::new(rw()))
        .expect("shared");
    write(&mut p, ro.stag(), ro.to_at(0), &[0xAB; 64]);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(t.cause, TermCause::protection(ProtectionCode::AccessRights));
    assert!(ro.buf().to_vec().iter().all(|&b| b == 0));
}

/// RFC 5041 §7.2 (STag not associated with the stream): a shared registration in another
/// protection domain than the QP's is refused to the peer, memory untouched.
#[test]
fn rfc5041_7_2_shared_region_in_another_pd_is_not_associated() {
    let mut p = Pair::established(&Opts::default());
    let mr = p.b.mr_with(4096, MrOptions::new(rw()));
    let other = p.b.mem.alloc_pd();
    let shared =
        p.b.mem
            .register_shared(mr.stag(), other, MrOptions::new(rw()))
            .expect("shared in another PD");
    assert_eq!(shared.pd(), other);
    write(&mut p, shared.stag(), shared.to_at(0), &[0xAB; 64]);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(
        t.cause,
        TermCause::Ddp(DdpCode::Tagged(TaggedCode::StagNotAssociated))
    );
    assert!(mr.buf().to_vec().iter().all(|&b| b == 0));
}

/// A shared registration of part of a region covers only that part (VA-based: the TOs of
/// the same bytes agree); a range beyond the region, a window and a fast-register STag are
/// refused, and nothing is registered by a refused call.
#[test]
fn verbs_shared_region_range_and_refusals() {
    let p = Pair::established(&Opts::default());
    let mr = p.b.mr_with(8192, MrOptions::new(rw() | Access::MW_BIND));
    let part =
        p.b.mem
            .register_shared(mr.stag(), p.b.pd, MrOptions::new(rw()).range(4096..6144))
            .expect("part");
    assert_eq!(part.len(), 2048);
    assert_eq!(part.to_at(0), mr.to_at(4096));
    assert_eq!(
        p.b.mem
            .register_shared(mr.stag(), p.b.pd, MrOptions::new(rw()).range(8000..8200))
            .unwrap_err(),
        MemError::OutOfBounds {
            start: 8000,
            end: 8200,
            len: 8192
        }
    );
    let mw = p.b.mem.alloc_mw(p.b.pd, MwType::Type1).unwrap();
    assert!(matches!(
        p.b.mem
            .register_shared(mw, p.b.pd, MrOptions::new(rw()))
            .unwrap_err(),
        MemError::NotARegion { .. }
    ));
    let fr = p.b.mem.alloc_fast_reg(p.b.pd, 4096).unwrap();
    assert!(matches!(
        p.b.mem
            .register_shared(fr, p.b.pd, MrOptions::new(rw()))
            .unwrap_err(),
        MemError::NotARegion { .. }
    ));
    assert_eq!(
        p.b.mem
            .register_shared(mr.stag() ^ 1, p.b.pd, MrOptions::new(rw()))
            .unwrap_err(),
        MemError::UnknownStag {
            stag: mr.stag() ^ 1
        }
    );
    assert_eq!(
        p.b.mem
            .register_shared(mr.stag(), p.b.pd, MrOptions::new(Access::REMOTE_WRITE))
            .unwrap_err(),
        MemError::RemoteNeedsLocalWrite {
            access: Access::REMOTE_WRITE
        }
    );
}

/// Re-registration with new rights and a new key: the peer writes through the new STag;
/// the STag of the old registration (same index, old key) is an Invalid STag.
#[test]
fn verbs_reregister_changes_rights_and_key_in_place() {
    let mut p = Pair::established(&Opts::default());
    let mr =
        p.b.mr_with(4096, MrOptions::new(Access::REMOTE_READ).zero_based());
    let key = (mr.stag() as u8).wrapping_add(17);
    let new =
        p.b.mem
            .reregister(
                mr.stag(),
                Rereg {
                    access: Some(rw()),
                    key: Some(key),
                    ..Rereg::default()
                },
            )
            .expect("reregister");
    assert_eq!(new.stag() >> 8, mr.stag() >> 8, "same index");
    assert_eq!(new.stag() as u8, key);
    assert_eq!(new.to_at(0), 0, "zero-based stays zero-based");
    write(&mut p, new.stag(), 100, &[5; 10]);
    assert!(p.a.send_wcs().iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(bytes(mr.buf(), 100, 10), [5; 10]);
    write(&mut p, mr.stag(), 0, &[6; 10]);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(
        t.cause,
        TermCause::Ddp(DdpCode::Tagged(TaggedCode::InvalidStag))
    );
    assert!(bytes(mr.buf(), 0, 10).iter().all(|&b| b == 0));
}

/// Re-registration with new memory: the peer's Write lands in the new buffer, the old one
/// stays untouched; a new PD takes the region away from the QP's stream (RFC 5041 §7.2).
#[test]
fn verbs_reregister_moves_the_region_to_new_memory_and_pd() {
    let mut p = Pair::established(&Opts::default());
    let old = p.b.mr_with(4096, MrOptions::new(rw()).zero_based());
    let buf = RegisteredBuf::try_new(2048).unwrap();
    let new =
        p.b.mem
            .reregister(
                old.stag(),
                Rereg {
                    memory: Some((buf.clone(), 1024..2048)),
                    ..Rereg::default()
                },
            )
            .expect("reregister");
    assert_eq!(new.len(), 1024);
    assert_eq!(new.stag(), old.stag(), "the key stays unless changed");
    write(&mut p, new.stag(), 0, &[7; 16]);
    assert!(p.a.send_wcs().iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(bytes(&buf, 1024, 16), [7; 16]);
    assert!(bytes(&buf, 0, 1024).iter().all(|&b| b == 0));
    assert!(old.buf().to_vec().iter().all(|&b| b == 0));
    let other = p.b.mem.alloc_pd();
    p.b.mem
        .reregister(
            new.stag(),
            Rereg {
                pd: Some(other),
                ..Rereg::default()
            },
        )
        .expect("new PD");
    write(&mut p, new.stag(), 0, &[8; 16]);
    let t = p.b.terminate_sent().expect("Terminate");
    assert_eq!(
        t.cause,
        TermCause::Ddp(DdpCode::Tagged(TaggedCode::StagNotAssociated))
    );
    assert_eq!(bytes(&buf, 1024, 16), [7; 16]);
}

/// Re-registration refusals change nothing: a region with a bound window, rights that need
/// local write, a range outside the new buffer, a window, an unknown STag.
#[test]
fn verbs_reregister_refusals_change_nothing() {
    let mut p = Pair::established(&Opts::default());
    let mr =
        p.b.mr_with(4096, MrOptions::new(rw() | Access::MW_BIND).zero_based());
    let mw = p.b.mem.alloc_mw(p.b.pd, MwType::Type1).unwrap();
    p.b.mem
        .bind_mw(
            p.b.pd,
            None,
            mw,
            mr.stag(),
            0,
            100,
            Access::REMOTE_READ,
            Addressing::ZeroBased,
        )
        .unwrap();
    assert_eq!(
        p.b.mem.reregister(mr.stag(), Rereg::default()).unwrap_err(),
        MemError::WindowsBound {
            stag: mr.stag(),
            windows: 1
        }
    );
    assert!(matches!(
        p.b.mem.reregister(mw, Rereg::default()).unwrap_err(),
        MemError::NotARegion { .. }
    ));
    let plain = p.b.mr_with(4096, MrOptions::new(rw()).zero_based());
    assert_eq!(
        p.b.mem
            .reregister(
                plain.stag(),
                Rereg {
                    access: Some(Access::REMOTE_WRITE),
                    ..Rereg::default()
                }
            )
            .unwrap_err(),
        MemError::RemoteNeedsLocalWrite {
            access: Access::REMOTE_WRITE
        }
    );
    let small = RegisteredBuf::try_new(100).unwrap();
    assert!(matches!(
        p.b.mem
            .reregister(
                plain.stag(),
                Rereg {
                    memory: Some((small, 0..200)),
                    ..Rereg::default()
                }
            )
            .unwrap_err(),
        MemError::OutOfBounds { .. }
    ));
    assert!(matches!(
        p.b.mem
            .reregister(plain.stag() ^ 1, Rereg::default())
            .unwrap_err(),
        MemError::UnknownStag { .. }
    ));
    // The region is as it was: the peer still writes it with the old rights and STag.
    write(&mut p, plain.stag(), 0, &[4; 8]);
    assert!(p.a.send_wcs().iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(bytes(plain.buf(), 0, 8), [4; 8]);
}
