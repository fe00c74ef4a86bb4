//! The State Cookie (RFC 9260 §5.1.3): everything needed to create the association, signed
//! with HMAC-SHA-256 so the responder keeps no state between INIT and COOKIE ECHO.
//!
//! Layout (all integers big-endian), followed by the 32-byte MAC over everything before it:
//! version (1), created ns (8), lifetime ns (8), local tag, peer tag, local initial TSN, peer
//! initial TSN, peer a_rwnd (4 each), outbound streams, inbound streams, local port, peer port
//! (2 each), local tie-tag, peer tie-tag (4 each), local address, address count (1), peer
//! addresses. An address is family (1: 4 or 6), IP (4 or 16), port (2).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 2;
const MAC_LEN: usize = 32;
/// Most peer addresses a cookie records.
pub(crate) const MAX_COOKIE_ADDRS: usize = 16;

/// Contents of a state cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cookie {
    pub created_ns: u64,
    pub lifetime_ns: u64,
    pub local_tag: u32,
    pub peer_tag: u32,
    pub local_tsn: u32,
    pub peer_tsn: u32,
    pub peer_rwnd: u32,
    pub outbound_streams: u16,
    pub inbound_streams: u16,
    pub local_port: u16,
    pub peer_port: u16,
    pub local_tie_tag: u32,
    pub peer_tie_tag: u32,
    pub local_addr: SocketAddr,
    pub peer_addrs: Vec<SocketAddr>,
    /// The peer's Adaptation Layer Indication from its INIT (RFC 5061 §4.2.7).
    pub peer_adaptation: Option<u32>,
}

/// Why a cookie was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CookieError {
    /// Too short, wrong version, or inconsistent lengths.
    Malformed,
    /// The MAC does not verify: forged or altered.
    BadMac,
}

fn put_addr(out: &mut Vec<u8>, a: &SocketAddr) {
    match a.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&a.port().to_be_bytes());
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b: [u8; 8] = self.take(8)?.try_into().ok()?;
        Some(u64::from_be_bytes(b))
    }
    fn addr(&mut self) -> Option<SocketAddr> {
        let ip = match self.u8()? {
            4 => {
                let b: [u8; 4] = self.take(4)?.try_into().ok()?;
                IpAddr::V4(Ipv4Addr::from(b))
            }
            6 => {
                let b: [u8; 16] = self.take(16)?.try_into().ok()?;
                IpAddr::V6(Ipv6Addr::from(b))
            }
            _ => return None,
        };
        Some(SocketAddr::new(ip, self.u16()?))
    }
}

fn mac(key: &[u8; 32], data: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    m.update(data);
    m
}

impl Cookie {
    /// Serialises and signs the cookie.
    pub fn seal(&self, key: &[u8; 32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        out.push(VERSION);
        out.extend_from_slice(&self.created_ns.to_be_bytes());
        out.extend_from_slice(&self.lifetime_ns.to_be_bytes());
        for v in [
            self.local_tag,
            self.peer_tag,
            self.local_tsn,
            self.peer_tsn,
            self.peer_rwnd,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        for v in [
            self.outbound_streams,
            self.inbound_streams,
            self.local_port,
            self.peer_port,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(&self.local_tie_tag.to_be_bytes());
        out.extend_from_slice(&self.peer_tie_tag.to_be_bytes());
        out.push(u8::from(self.peer_adaptation.is_some()));
        out.extend_from_slice(&self.peer_adaptation.unwrap_or(0).to_be_bytes());
        put_addr(&mut out, &self.local_addr);
        let addrs = &self.peer_addrs[..self.peer_addrs.len().min(MAX_COOKIE_ADDRS)];
        out.push(addrs.len() as u8);
        for a in addrs {
            put_addr(&mut out, a);
        }
        let tag = mac(key, &out).finalize().into_bytes();
        out.extend_from_slice(&tag);
        out
    }

    /// Verifies the MAC (in constant time) and decodes.
    pub fn open(bytes: &[u8], key: &[u8; 32]) -> Result<Cookie, CookieError> {
        if bytes.len() < MAC_LEN + 1 {
            return Err(CookieError::Malformed);
        }
        let (body, tag) = bytes.split_at(bytes.len() - MAC_LEN);
        mac(key, body)
            .verify_slice(tag)
            .map_err(|_| CookieError::BadMac)?;
        let mut r = Reader { b: body };
        let parse = |r: &mut Reader<'_>| -> Option<Cookie> {
            if r.u8()? != VERSION {
                return None;
            }
            let mut c = Cookie {
                created_ns: r.u64()?,
                lifetime_ns: r.u64()?,
                local_tag: r.u32()?,
                peer_tag: r.u32()?,
                local_tsn: r.u32()?,
                peer_tsn: r.u32()?,
                peer_rwnd: r.u32()?,
                outbound_streams: r.u16()?,
                inbound_streams: r.u16()?,
                local_port: r.u16()?,
                peer_port: r.u16()?,
                local_tie_tag: r.u32()?,
                peer_tie_tag: r.u32()?,
                peer_adaptation: {
                    let has = r.u8()?;
                    let x = r.u32()?;
                    (has != 0).then_some(x)
                },
                local_addr: r.addr()?,
                peer_addrs: Vec::new(),
            };
            let n = r.u8()?;
            for _ in 0..n {
                c.peer_addrs.push(r.addr()?);
            }
            if !r.b.is_empty() {
                return None;
            }
            Some(c)
        };
        parse(&mut r).ok_or(CookieError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Cookie {
        Cookie {
            created_ns: 5,
            lifetime_ns: 60_000_000_000,
            local_tag: 1,
            peer_tag: 2,
            local_tsn: 3,
            peer_tsn: 4,
            peer_rwnd: 65536,
            outbound_streams: 10,
            inbound_streams: 12,
            local_port: 5000,
            peer_port: 6000,
            local_tie_tag: 0,
            peer_tie_tag: 0,
            local_addr: "10.0.0.1:0".parse().unwrap(),
            peer_addrs: vec![
                "10.0.0.2:0".parse().unwrap(),
                "[fe80::1]:9".parse().unwrap(),
            ],
            peer_adaptation: Some(1),
        }
    }

    /// RFC 9260 §5.1.5 step 1-2: a cookie whose MAC does not verify is refused, whichever
    /// byte was altered.
    #[test]
    fn rfc9260_5_1_5_tampered_cookie_is_refused() {
        let key = [7u8; 32];
        let sealed = sample().seal(&key);
        assert_eq!(Cookie::open(&sealed, &key), Ok(sample()));
        for i in 0..sealed.len() {
            let mut t = sealed.clone();
            t[i] ^= 0x01;
            assert_eq!(Cookie::open(&t, &key), Err(CookieError::BadMac), "byte {i}");
        }
        assert_eq!(Cookie::open(&sealed, &[8u8; 32]), Err(CookieError::BadMac));
        assert_eq!(
            Cookie::open(&sealed[..10], &key),
            Err(CookieError::Malformed)
        );
    }
}
