//! CRC32c (Castagnoli polynomial 0x1EDC6F41, the iSCSI CRC) for MPA FPDUs.
//!
//! RFC 5044 §4.4 protects each FPDU with the same CRC32c that iSCSI uses (RFC 3720,
//! HeaderDigest/DataDigest; test vectors in Appendix B.4): initial value all ones, reflected
//! input and output, final complement. [`crc32c`] and [`Crc32c`] return the
//! CRC as the usual 32-bit value (0xE3069283 for the ASCII string "123456789").
//!
//! ## Octet order in the CRC field
//!
//! The field carries that value **least significant octet first**, exactly the
//! octet order RFC 3720 Appendix B.4 lists for iSCSI digests (32 zero octets give
//! the value 0x8A9136AA, transmitted as `aa 36 91 8a`). Read naively as a
//! big-endian 32-bit word the field therefore shows the value byte-swapped.
//! Real traffic agrees: Linux siw sends an FPDU whose CRC32c value is 0xFF2248E5
//! with the CRC field octets `e5 48 22 ff` (see the tests). Use [`to_wire`] and
//! [`from_wire`] rather than `to_be_bytes` so no caller gets this wrong.

use crc_fast::{CrcAlgorithm, Digest};

/// Number of octets in the MPA CRC field.
pub const CRC_LEN: usize = 4;

/// CRC32c of `data` in one call.
pub fn crc32c(data: &[u8]) -> u32 {
    // The iSCSI CRC is 32 bits wide; the library returns it in a u64.
    crc_fast::checksum(CrcAlgorithm::Crc32Iscsi, data) as u32
}

/// The four CRC field octets, in wire order, for a CRC32c value.
pub fn to_wire(crc: u32) -> [u8; CRC_LEN] {
    crc.to_le_bytes()
}

/// The CRC32c value carried by four CRC field octets in wire order.
pub fn from_wire(field: [u8; CRC_LEN]) -> u32 {
    u32::from_le_bytes(field)
}

/// Incremental CRC32c, for data that arrives (or is emitted) in pieces.
#[derive(Clone, Copy, Debug)]
pub struct Crc32c {
    digest: Digest,
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    /// A fresh digest (no data yet).
    pub fn new() -> Self {
        Self {
            digest: Digest::new(CrcAlgorithm::Crc32Iscsi),
        }
    }

    /// Feeds more data.
    pub fn update(&mut self, data: &[u8]) {
        self.digest.update(data);
    }

    /// The CRC32c of everything fed so far; the digest stays usable.
    pub fn value(&self) -> u32 {
        self.digest.finalize() as u32
    }

    /// Forgets all data fed so far.
    pub fn reset(&mut self) {
        self.digest.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The iSCSI SCSI Read (10) command PDU of RFC 3720 Appendix B.4.
    const ISCSI_READ_PDU: [u8; 48] = [
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
        0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00,
    ];

    /// RFC 3720 Appendix B.4 test vectors, written the way the RFC prints them:
    /// the CRC field octets in transmission order.
    fn rfc3720_b4_vectors() -> Vec<(Vec<u8>, [u8; 4])> {
        vec![
            (vec![0u8; 32], [0xaa, 0x36, 0x91, 0x8a]),
            (vec![0xffu8; 32], [0x43, 0xab, 0xa8, 0x62]),
            ((0u8..32).collect(), [0x4e, 0x79, 0xdd, 0x46]),
            ((0u8..32).rev().collect(), [0x5c, 0xdb, 0x3f, 0x11]),
            (ISCSI_READ_PDU.to_vec(), [0x56, 0x3a, 0x96, 0xd9]),
        ]
    }

    /// RFC 3720 §B.4 (used by RFC 5044 for the MPA CRC): every test vector's
    /// CRC field octets match, in one call and incrementally in uneven pieces.
    #[test]
    fn rfc3720_b4_test_vectors() {
        for (data, field) in rfc3720_b4_vectors() {
            assert_eq!(to_wire(crc32c(&data)), field, "one-shot, {data:02x?}");
            assert_eq!(crc32c(&data), from_wire(field));
            let mut digest = Crc32c::new();
            let (a, rest) = data.split_at(3);
            let (b, c) = rest.split_at(rest.len() / 2);
            digest.update(a);
            digest.update(b);
            digest.update(&[]);
            digest.update(c);
            assert_eq!(to_wire(digest.value()), field, "incremental");
        }
    }

    /// The catalogue check value of CRC-32C (iSCSI) for "123456789".
    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let mut d = Crc32c::new();
        d.update(b"1234");
        assert_ne!(d.value(), 0xE306_9283);
        d.reset();
        d.update(b"123456789");
        assert_eq!(d.value(), 0xE306_9283);
    }

    /// RFC 5044 §4.4: the CRC of an FPDU covers everything before the CRC field;
    /// an FPDU captured from Linux siw (CRC negotiated) carries the CRC32c octets
    /// least significant first.
    #[test]
    fn rfc5044_4_4_crc_field_octet_order_matches_siw_capture() {
        // siw-rping-crc.pcap, frame 36: an untagged Send FPDU (ULPDU length 34).
        let fpdu: [u8; 40] = [
            0x00, 0x22, 0x41, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x11, 0x11, 0x11, 0x00, 0x00, 0x00, 0x07, 0xd0, 0xe5, 0x48, 0x22, 0xff,
        ];
        let (body, field) = fpdu.split_at(36);
        let field: [u8; 4] = field.try_into().expect("four octets");
        assert_eq!(to_wire(crc32c(body)), field);
        assert_ne!(crc32c(body).to_be_bytes(), field);
    }
}
