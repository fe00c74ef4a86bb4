//! Big-endian fields of the wire formats: DDP's own headers and those of the protocols that
//! build on DDP (RDMAP's, the RFC 5043 SCTP adaptation's). One set of readers for all of them.

/// The big-endian `u16` at `b[at..]`, `None` if `b` ends before it.
#[inline]
pub fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(*b.get(at..)?.first_chunk()?))
}

/// The big-endian `u32` at `b[at..]`, `None` if `b` ends before it.
#[inline]
pub fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(*b.get(at..)?.first_chunk()?))
}

/// The big-endian `u64` at `b[at..]`, `None` if `b` ends before it.
#[inline]
pub fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(*b.get(at..)?.first_chunk()?))
}

/// The big-endian `u32` at `h[at..]` of a header whose length was checked when it was
/// taken: a field outside it is a bug in the caller's layout, not bad input.
#[inline]
pub fn field32(h: &[u8], at: usize) -> u32 {
    be32(h, at).expect("field inside the checked header")
}

/// The big-endian `u64` at `h[at..]` of a header whose length was checked (see [`field32`]).
#[inline]
pub fn field64(h: &[u8], at: usize) -> u64 {
    be64(h, at).expect("field inside the checked header")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_network_byte_order_and_refuses_short_input() {
        let b = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09];
        assert_eq!(be16(&b, 0), Some(0x0102));
        assert_eq!(be32(&b, 1), Some(0x0203_0405));
        assert_eq!(be64(&b, 1), Some(0x0203_0405_0607_0809));
        assert_eq!(be64(&b, 2), None);
        assert_eq!(be16(&b, 8), None);
        assert_eq!(be32(&b, usize::MAX), None);
        assert_eq!(field32(&b, 4), 0x0506_0708);
        assert_eq!(field64(&b, 0), 0x0102_0304_0506_0708);
    }
}
