//! Reading packet captures (pcap and pcapng) into link-layer frames with their timestamps.
//!
//! Both classic pcap (either byte order, micro- or nanosecond timestamps) and pcapng are
//! accepted; the format is chosen from the file's magic number. Link types understood by the
//! rest of the decoder are Ethernet, Linux cooked capture (SLL) and raw IP; frames of other link
//! types are kept and reported as undecodable rather than dropped silently.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

/// Link-layer framing of a captured frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// Ethernet II / 802.3 (pcap link type 1).
    Ethernet,
    /// Linux cooked capture v1 (pcap link type 113).
    LinuxSll,
    /// Raw IPv4 or IPv6 with no link header (pcap link types 101, 228, 229).
    RawIp,
    /// Any other link type, by its pcap number.
    Other(u32),
}

impl LinkType {
    fn from_datalink(dl: DataLink) -> Self {
        match dl {
            DataLink::ETHERNET => LinkType::Ethernet,
            DataLink::LINUX_SLL => LinkType::LinuxSll,
            DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => LinkType::RawIp,
            other => LinkType::Other(u32::from(other)),
        }
    }
}

/// One captured frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// 1-based position in the capture file, as tshark and Wireshark number frames.
    pub number: u64,
    /// Capture timestamp (since the Unix epoch, as recorded in the file).
    pub timestamp: Duration,
    /// Link-layer framing of `data`.
    pub link: LinkType,
    /// The captured bytes (possibly fewer than were on the wire, see `orig_len`).
    pub data: Vec<u8>,
    /// Length of the frame on the wire.
    pub orig_len: u32,
}

/// Failure to read a capture file.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is neither pcap nor pcapng.
    #[error("{path} is not a pcap or pcapng capture (magic {magic:02x?})")]
    NotACapture {
        /// The file.
        path: String,
        /// The first bytes found.
        magic: Vec<u8>,
    },
    /// The capture is damaged.
    #[error("{path}: damaged capture after {frames} frames: {detail}")]
    Damaged {
        /// The file.
        path: String,
        /// Frames read before the damage.
        frames: u64,
        /// What the capture reader reported.
        detail: String,
    },
}

const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
];
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Reads every frame of a pcap or pcapng file; fails on the first damage.
pub fn read_file(path: &Path) -> Result<Vec<Frame>, CaptureError> {
    match read_file_lenient(path)? {
        (frames, None) => Ok(frames),
        (_, Some(e)) => Err(e),
    }
}

/// Reads the frames of a pcap or pcapng file up to the first damage (a frame cut short, a
/// broken block), returning them with the damage, as tshark does. A file that is not a
/// capture (its first four octets are no pcap or pcapng magic) is refused at once, before
/// the rest is read: `/dev/zero` does not keep the reader busy for ever.
pub fn read_file_lenient(path: &Path) -> Result<(Vec<Frame>, Option<CaptureError>), CaptureError> {
    let name = path.display().to_string();
    let io = |source| CaptureError::Io {
        path: name.clone(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut head = Vec::with_capacity(4);
    (&mut f).take(4).read_to_end(&mut head).map_err(io)?;
    check_magic(&head, &name)?;
    let mut bytes = head;
    f.read_to_end(&mut bytes).map_err(io)?;
    read_bytes_lenient(&bytes, &name)
}

fn check_magic(bytes: &[u8], name: &str) -> Result<(), CaptureError> {
    let magic: Vec<u8> = bytes.iter().take(4).copied().collect();
    if PCAP_MAGICS.iter().any(|m| m[..] == magic[..]) || magic[..] == PCAPNG_MAGIC[..] {
        Ok(())
    } else {
        Err(CaptureError::NotACapture {
            path: name.to_string(),
            magic,
        })
    }
}

/// Reads every frame of a pcap or pcapng capture held in memory; `name` is used in errors.
pub fn read_bytes(bytes: &[u8], name: &str) -> Result<Vec<Frame>, CaptureError> {
    match read_bytes_lenient(bytes, name)? {
        (frames, None) => Ok(frames),
        (_, Some(e)) => Err(e),
    }
}

/// [`read_bytes`] that keeps the frames before a damage (see [`read_file_lenient`]).
pub fn read_bytes_lenient(
    bytes: &[u8],
    name: &str,
) -> Result<(Vec<Frame>, Option<CaptureError>), CaptureError> {
    check_magic(bytes, name)?;
    if bytes.get(..4) == Some(&PCAPNG_MAGIC[..]) {
        read_pcapng(bytes, name)
    } else {
        read_pcap(bytes, name)
    }
}

fn damaged(name: &str, frames: u64, e: impl std::fmt::Display) -> CaptureError {
    CaptureError::Damaged {
        path: name.to_string(),
        frames,
        detail: e.to_string(),
    }
}

type Lenient = Result<(Vec<Frame>, Option<CaptureError>), CaptureError>;

fn read_pcap(bytes: &[u8], name: &str) -> Lenient {
    let mut reader = PcapReader::new(bytes).map_err(|e| damaged(name, 0, e))?;
    let link = LinkType::from_datalink(reader.header().datalink);
    let mut frames = Vec::new();
    while let Some(pkt) = reader.next_packet() {
        let pkt = match pkt {
            Ok(p) => p,
            Err(e) => {
                let d = damaged(name, frames.len() as u64, e);
                return Ok((frames, Some(d)));
            }
        };
        frames.push(Frame {
            number: frames.len() as u64 + 1,
            timestamp: pkt.timestamp,
            link,
            data: pkt.data.into_owned(),
            orig_len: pkt.orig_len,
        });
    }
    Ok((frames, None))
}

fn read_pcapng<R: Read>(bytes: R, name: &str) -> Lenient {
    let mut reader = PcapNgReader::new(bytes).map_err(|e| damaged(name, 0, e))?;
    let mut frames = Vec::new();
    // Link types of the interfaces described so far in the current section.
    let mut interfaces: Vec<LinkType> = Vec::new();
    while let Some(block) = reader.next_block() {
        let block = match block {
            Ok(b) => b,
            Err(e) => {
                let d = damaged(name, frames.len() as u64, e);
                return Ok((frames, Some(d)));
            }
        };
        let link_of = |id: u32| {
            interfaces
                .get(id as usize)
                .copied()
                .unwrap_or(LinkType::Other(u32::MAX))
        };
        let (link, timestamp, data, orig_len) = match block {
            Block::SectionHeader(_) => {
                interfaces.clear();
                continue;
            }
            Block::InterfaceDescription(idb) => {
                interfaces.push(LinkType::from_datalink(idb.linktype));
                continue;
            }
            Block::EnhancedPacket(epb) => (
                link_of(epb.interface_id),
                epb.timestamp,
                epb.data.into_owned(),
                epb.original_len,
            ),
            Block::SimplePacket(spb) => (
                link_of(0),
                Duration::ZERO,
                spb.data.into_owned(),
                spb.original_len,
            ),
            _ => continue,
        };
        frames.push(Frame {
            number: frames.len() as u64 + 1,
            timestamp,
            link,
            data,
            orig_len,
        });
    }
    Ok((frames, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

    fn pcap_with(frames: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = PcapWriter::with_header(
            &mut out,
            PcapHeader {
                datalink: DataLink::ETHERNET,
                ..Default::default()
            },
        )
        .unwrap();
        for (i, f) in frames.iter().enumerate() {
            let ts = Duration::from_micros(1000 + i as u64);
            w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
                .unwrap();
        }
        let _ = w.into_writer();
        out
    }

    #[test]
    fn reads_pcap_frames_in_order_with_numbers() {
        let bytes = pcap_with(&[b"abc", b"defg"]);
        let frames = read_bytes(&bytes, "mem").unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].number, 1);
        assert_eq!(frames[1].number, 2);
        assert_eq!(frames[1].data, b"defg");
        assert_eq!(frames[0].link, LinkType::Ethernet);
        assert_eq!(frames[1].timestamp, Duration::from_micros(1001));
    }

    #[test]
    fn rejects_non_capture() {
        let err = read_bytes(b"hello world", "x.txt").unwrap_err();
        assert!(matches!(err, CaptureError::NotACapture { .. }), "{err}");
        assert!(read_bytes(b"", "empty").is_err());
    }

    #[test]
    fn truncated_capture_is_reported_not_panicking() {
        let bytes = pcap_with(&[b"abcdefgh", b"ijklmnop"]);
        for cut in 0..bytes.len() {
            // Every prefix either reads cleanly (cut at a record boundary) or reports damage.
            let _ = read_bytes(&bytes[..cut], "cut");
        }
        let err = read_bytes(&bytes[..bytes.len() - 3], "cut").unwrap_err();
        assert!(
            matches!(err, CaptureError::Damaged { frames: 1, .. }),
            "{err}"
        );
    }
}
