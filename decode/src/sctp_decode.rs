//! `softrnic decode` for SCTP: packets over IPv4/IPv6 (protocol 132) and over RFC 6951 UDP
//! encapsulation, grouped into associations, with DDP over SCTP (RFC 5043) recognised by PPID.
//!
//! Each SCTP packet is parsed with the codec of the SCTP engine ([`sctp::wire`]): common header,
//! CRC32c (RFC 9260 §6.8) and every chunk. Packets are assigned to associations by their ports
//! and verification tags (RFC 9260 §8.5): an INIT opens an association and names the tag the
//! initiator expects, the INIT ACK names the responder's; every later packet must carry the
//! tag of its receiver (or, with the T bit of ABORT and SHUTDOWN COMPLETE, its sender's own,
//! §8.5.1). A packet whose tag matches no association seen opens one marked "setup not
//! captured", so captures that start mid-association still decode.
//!
//! Per association the decoder keeps, for each direction, the TSN range of DATA, the number of
//! DATA chunks and user bytes, retransmissions (a TSN seen again), SACKs with gap blocks and
//! duplicate reports, and the paths (source and destination address pairs) used, so a
//! multihomed association shows every path it used and how many packets each carried.
//!
//! DATA of PPID 16 and 17 is reassembled (B..E fragments) and decoded with the RFC 5043
//! adaptation layer ([`sctp::ddp_adapt`]): DDP-SSN plus DDP/RDMAP headers, or the DDP Stream
//! Session Control function; the Adaptation Layer Indication of INIT/INIT ACK is shown.
//!
//! Errors (exit status 1): a bad CRC32c, a packet or chunk that does not parse, an INIT with a
//! non-zero verification tag, a DDP-over-SCTP message that is invalid. Warnings: a frame cut
//! short by the capture's snap length (CRC not checkable), a packet without chunks, a DDP
//! message sent ordered (RFC 5043 §10 has them unordered).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::net::IpAddr;
use std::time::Duration;

use sctp::wire::{
    Chunk, CommonHeader, DataChunk, ErrorCause, InitChunk, Packet, Param, SackChunk, parse_packet,
};

use super::{Dir, EventKind};
use crate::record::{self, Fields, Layer, Record, variant_name};

/// PPID of `softrnic sctp-perf`'s control messages ("SPRF").
pub const PPID_SCTP_PERF_CONTROL: u32 = 0x5350_5246;
/// PPID of `softrnic sctp-perf`'s data messages ("SPRD").
pub const PPID_SCTP_PERF_DATA: u32 = 0x5350_5244;
use crate::capture::Frame;
use crate::tcp::{Transport, transport};

/// IANA port for SCTP over UDP (RFC 6951 §5).
pub const SCTP_UDP_PORT: u16 = 9899;
/// IP protocol number of SCTP.
pub const IPPROTO_SCTP: u8 = 132;
/// IP protocol number of UDP.
const IPPROTO_UDP: u8 = 17;
/// PPID of a DDP Segment (RFC 5043 §5.2).
pub const PPID_DDP_SEGMENT: u32 = sctp::ddp_adapt::PPID_DDP_SEGMENT;
/// PPID of a DDP Stream Session Control message (RFC 5043 §5.2).
pub const PPID_DDP_SESSION_CONTROL: u32 = sctp::ddp_adapt::PPID_DDP_STREAM_SESSION_CONTROL;

/// Parameter types the codec keeps as `Param::Unknown` but the decoder names.
mod extra_param {
    /// Adaptation Layer Indication (RFC 5061).
    pub const ADAPTATION_LAYER_INDICATION: u16 = sctp::ddp_adapt::PARAM_ADAPTATION_LAYER_INDICATION;
    /// Forward-TSN-Supported (RFC 3758 §3.1).
    pub const FORWARD_TSN_SUPPORTED: u16 = 0xc000;
    /// Supported Extensions (RFC 5061 §4.2.7).
    pub const SUPPORTED_EXTENSIONS: u16 = 0x8008;
    /// Random (RFC 4895 §3.1).
    pub const RANDOM: u16 = 0x8002;
    /// Chunk List (RFC 4895 §3.2).
    pub const CHUNK_LIST: u16 = 0x8003;
    /// Requested HMAC Algorithm (RFC 4895 §3.3).
    pub const HMAC_ALGO: u16 = 0x8004;
    /// Padding (RFC 4820 §3).
    pub const PADDING: u16 = 0x8005;
    /// Zero Checksum Acceptable (RFC 9653 §4).
    pub const ZERO_CHECKSUM: u16 = 0x8001;
}

/// What the SCTP part of `decode` looks at and prints.
#[derive(Debug, Clone)]
pub struct SctpOptions {
    /// UDP ports whose datagrams carry SCTP (RFC 6951); 9899 by default.
    pub udp_ports: Vec<u16>,
    /// Print only the association with this number.
    pub assoc: Option<usize>,
}

impl Default for SctpOptions {
    fn default() -> Self {
        SctpOptions {
            udp_ports: vec![SCTP_UDP_PORT],
            assoc: None,
        }
    }
}

/// How an SCTP packet travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Encap {
    /// Directly over IP (protocol 132).
    RawIp,
    /// In UDP (RFC 6951), with these UDP source and destination ports.
    Udp(u16, u16),
}

impl Encap {
    fn label(self) -> String {
        match self {
            Encap::RawIp => "raw IP".into(),
            Encap::Udp(s, d) => format!("UDP {s}->{d}"),
        }
    }
}

/// One decoded SCTP packet (a line of output plus one line per chunk).
#[derive(Debug, Clone)]
pub struct PacketEvent {
    /// Capture frame.
    pub frame: u64,
    /// Its timestamp.
    pub timestamp: Duration,
    /// Direction within the association.
    pub dir: Dir,
    /// Source and destination addresses.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Encapsulation.
    pub encap: Encap,
    /// Verification tag.
    pub vtag: u32,
    /// One line per chunk (or the error).
    pub lines: Vec<Line>,
}

/// One line of a packet's output.
#[derive(Debug, Clone)]
pub struct Line {
    /// Severity: the verdict ([`Record::verdict`]).
    pub kind: EventKind,
    /// Text ([`Record::describe`]).
    pub text: String,
    /// What was decoded ([`Record::Sctp`]).
    pub record: Record,
}

impl Line {
    /// The line of a record.
    pub fn new(r: SctpRecord) -> Line {
        let record = Record::Sctp(r);
        Line {
            kind: record.verdict(),
            text: record.describe(),
            record,
        }
    }
}

/// What one line of the SCTP decode is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SctpRecord {
    /// A frame cut short by the capture's snap length: not decoded.
    Truncated {
        /// Octets captured.
        captured: usize,
        /// Octets on the wire.
        original: u32,
    },
    /// The CRC32c does not match (RFC 9260 §6.8).
    BadChecksum(sctp::wire::WireError),
    /// The packet or a chunk does not parse.
    Malformed(sctp::wire::WireError),
    /// An INIT with a non-zero verification tag (RFC 9260 §8.5.1).
    InitTagNotZero {
        /// The tag.
        vtag: u32,
    },
    /// One chunk.
    Chunk {
        /// Chunk type.
        chunk_type: u8,
        /// What the chunk holds.
        info: ChunkInfo,
        /// The text of the line.
        text: String,
    },
    /// A packet without chunks.
    NoChunks,
    /// A DDP over SCTP message sent ordered (RFC 5043 §10).
    DdpOrdered,
    /// A DDP Segment (PPID 16): DDP-SSN and the DDP/RDMAP header.
    DdpSegment {
        /// DDP-SSN.
        ddp_ssn: u16,
        /// DDP/RDMAP header.
        header: rdmap::Header,
        /// Payload octets after the headers.
        payload_len: usize,
    },
    /// A DDP Segment that is not valid DDP/RDMAP.
    DdpInvalid {
        /// DDP-SSN.
        ddp_ssn: u16,
        /// Segment length.
        len: usize,
        /// Why.
        error: rdmap::DecodeError,
    },
    /// A DDP Stream Session Control message (PPID 17, RFC 5043 §5.2.3).
    DdpControl {
        /// DDP-SSN.
        ddp_ssn: u16,
        /// Function code.
        function: sctp::ddp_adapt::FunctionCode,
        /// Private data length.
        private_data_len: usize,
        /// RFC 6581 §7 IRD/ORD of an enhanced function.
        enhanced: Option<mpa::EnhancedData>,
    },
    /// A DDP over SCTP message that is invalid.
    Adapt(sctp::ddp_adapt::AdaptError),
}

/// The typed content of a chunk line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkInfo {
    /// DATA.
    Data {
        /// TSN.
        tsn: u32,
        /// Stream identifier.
        stream: u16,
        /// Stream sequence number.
        ssn: u16,
        /// Payload protocol identifier.
        ppid: u32,
        /// User data length.
        len: usize,
        /// Flags (I U B E).
        flags: u8,
        /// TSN seen before.
        retransmission: bool,
    },
    /// INIT or INIT ACK.
    Init {
        /// Initiate tag.
        initiate_tag: u32,
        /// Advertised receiver window.
        a_rwnd: u32,
        /// Outbound streams.
        outbound_streams: u16,
        /// Inbound streams.
        inbound_streams: u16,
        /// Initial TSN.
        initial_tsn: u32,
        /// Addresses announced.
        addresses: Vec<IpAddr>,
        /// Adaptation Layer Indication (RFC 5061; 1 is DDP, RFC 5043).
        adaptation: Option<u32>,
    },
    /// HEARTBEAT, HEARTBEAT ACK, COOKIE ECHO: the length of the opaque value they carry.
    Opaque {
        /// Octets of heartbeat information or cookie.
        len: usize,
    },
    /// SACK.
    Sack {
        /// Cumulative TSN ack.
        cum_tsn_ack: u32,
        /// Advertised receiver window.
        a_rwnd: u32,
        /// Gap ack blocks.
        gaps: usize,
        /// Duplicate TSNs.
        dups: usize,
    },
    /// SHUTDOWN.
    Shutdown {
        /// Cumulative TSN ack.
        cum_tsn_ack: u32,
    },
    /// ABORT, ERROR: the causes' names.
    Causes {
        /// T bit (ABORT).
        t_bit: bool,
        /// Cause names.
        causes: Vec<String>,
    },
    /// Any other chunk.
    Other,
}

impl SctpRecord {
    /// The layer of the line.
    pub fn layer(&self) -> Layer {
        match self {
            SctpRecord::DdpSegment { .. } => Layer::Rdmap,
            SctpRecord::DdpInvalid { error, .. } => match error {
                rdmap::DecodeError::Ddp(_) => Layer::Ddp,
                _ => Layer::Rdmap,
            },
            SctpRecord::DdpOrdered | SctpRecord::DdpControl { .. } | SctpRecord::Adapt(_) => {
                Layer::Ddp
            }
            _ => Layer::Sctp,
        }
    }

    /// The verdict on the line.
    pub fn verdict(&self) -> EventKind {
        match self {
            SctpRecord::Chunk { .. }
            | SctpRecord::DdpSegment { .. }
            | SctpRecord::DdpControl { .. } => EventKind::Info,
            SctpRecord::Truncated { .. } | SctpRecord::NoChunks | SctpRecord::DdpOrdered => {
                EventKind::Warning
            }
            SctpRecord::BadChecksum(_)
            | SctpRecord::Malformed(_)
            | SctpRecord::InitTagNotZero { .. }
            | SctpRecord::DdpInvalid { .. }
            | SctpRecord::Adapt(_) => EventKind::Error,
        }
    }

    /// The text of the line.
    pub fn describe(&self) -> String {
        match self {
            SctpRecord::Truncated { captured, original } => {
                format!("frame cut to {captured} of {original} bytes by the capture: not decoded")
            }
            SctpRecord::BadChecksum(e) => format!("{e} (RFC 9260 §6.8)"),
            SctpRecord::Malformed(e) => format!("malformed packet: {e}"),
            SctpRecord::InitTagNotZero { vtag } => {
                format!("INIT with verification tag {vtag:#010x}; RFC 9260 §8.5.1 requires 0")
            }
            SctpRecord::Chunk { text, .. } => text.clone(),
            SctpRecord::NoChunks => "packet without chunks".into(),
            SctpRecord::DdpOrdered => format!(
                "  DDP over SCTP message sent ordered: {}",
                sctp::ddp_adapt::AdaptError::Ordered
            ),
            SctpRecord::DdpSegment {
                ddp_ssn,
                header,
                payload_len,
            } => format!(
                "  DDP-SSN {ddp_ssn} DDP/RDMAP {}",
                record::describe_header(header, *payload_len)
            ),
            SctpRecord::DdpInvalid {
                ddp_ssn,
                len,
                error,
            } => format!(
                "  DDP-SSN {ddp_ssn}: DDP segment of {len} bytes is not valid DDP/RDMAP: {error}"
            ),
            SctpRecord::DdpControl {
                ddp_ssn,
                function,
                private_data_len,
                enhanced,
            } => {
                let irdord = match enhanced {
                    Some(e) => format!(
                        " (IRD {} ORD {}, then {} bytes of ULP data)",
                        e.ird,
                        e.ord,
                        private_data_len - 4
                    ),
                    None => String::new(),
                };
                format!(
                    "  DDP-SSN {ddp_ssn} DDP Stream {function} private data {private_data_len} bytes{irdord}"
                )
            }
            SctpRecord::Adapt(e) => format!("  {e}"),
        }
    }

    /// Adds the line's fields.
    pub fn fields(&self, f: &mut Fields) {
        match self {
            SctpRecord::Truncated { captured, original } => {
                f.push("captured", *captured);
                f.push("original", *original);
            }
            SctpRecord::BadChecksum(e) => {
                f.push("error", variant_name(e));
                if let sctp::wire::WireError::BadChecksum { carried, computed } = e {
                    f.push("crc_field", *carried);
                    f.push("crc_computed", *computed);
                }
                f.push("rfc", "RFC 9260 §6.8");
            }
            SctpRecord::Malformed(e) => f.push("error", variant_name(e)),
            SctpRecord::InitTagNotZero { vtag } => {
                f.push("error", "InitTagNotZero");
                f.push("vtag", *vtag);
                f.push("rfc", "RFC 9260 §8.5.1");
            }
            SctpRecord::Chunk {
                chunk_type, info, ..
            } => {
                f.push("chunk_type", *chunk_type);
                f.push("chunk_name", chunk_name(*chunk_type));
                match info {
                    ChunkInfo::Data {
                        tsn,
                        stream,
                        ssn,
                        ppid,
                        len,
                        flags,
                        retransmission,
                    } => {
                        f.push("tsn", *tsn);
                        f.push("stream", *stream);
                        f.push("ssn", *ssn);
                        f.push("ppid", *ppid);
                        if let Some(n) = ppid_name(*ppid) {
                            f.push("ppid_name", n);
                        }
                        f.push("length", *len);
                        f.push("flags", *flags);
                        f.push("unordered", flags & 0x04 != 0);
                        f.push("beginning", flags & 0x02 != 0);
                        f.push("end", flags & 0x01 != 0);
                        f.push("retransmission", *retransmission);
                    }
                    ChunkInfo::Init {
                        initiate_tag,
                        a_rwnd,
                        outbound_streams,
                        inbound_streams,
                        initial_tsn,
                        addresses,
                        adaptation,
                    } => {
                        f.push("initiate_tag", *initiate_tag);
                        f.push("a_rwnd", *a_rwnd);
                        f.push("outbound_streams", *outbound_streams);
                        f.push("inbound_streams", *inbound_streams);
                        f.push("initial_tsn", *initial_tsn);
                        if !addresses.is_empty() {
                            let a: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
                            f.push("addresses", a.join(" "));
                        }
                        if let Some(v) = adaptation {
                            f.push("adaptation_indication", *v);
                        }
                    }
                    ChunkInfo::Opaque { len } => f.push("value_length", *len),
                    ChunkInfo::Sack {
                        cum_tsn_ack,
                        a_rwnd,
                        gaps,
                        dups,
                    } => {
                        f.push("cum_tsn_ack", *cum_tsn_ack);
                        f.push("a_rwnd", *a_rwnd);
                        f.push("gap_blocks", *gaps);
                        f.push("dup_tsns", *dups);
                    }
                    ChunkInfo::Shutdown { cum_tsn_ack } => f.push("cum_tsn_ack", *cum_tsn_ack),
                    ChunkInfo::Causes { t_bit, causes } => {
                        f.push("t_bit", *t_bit);
                        f.push("causes", causes.join("; "));
                    }
                    ChunkInfo::Other => {}
                }
            }
            SctpRecord::NoChunks => {}
            SctpRecord::DdpOrdered => {
                f.push("error", "Ordered");
                f.push("rfc", "RFC 5043 §10");
            }
            SctpRecord::DdpSegment {
                ddp_ssn,
                header,
                payload_len,
            } => {
                f.push("ddp_ssn", *ddp_ssn);
                record::header_fields(f, header, *payload_len);
            }
            SctpRecord::DdpInvalid {
                ddp_ssn,
                len,
                error,
            } => {
                f.push("ddp_ssn", *ddp_ssn);
                f.push("segment_length", *len);
                record::decode_error_fields(f, error);
            }
            SctpRecord::DdpControl {
                ddp_ssn,
                function,
                private_data_len,
                enhanced,
            } => {
                f.push("ddp_ssn", *ddp_ssn);
                f.push("function_code", function.code());
                f.push("function", function.to_string());
                f.push("private_data_length", *private_data_len);
                if let Some(e) = enhanced {
                    f.push("ird", e.ird);
                    f.push("ord", e.ord);
                }
            }
            SctpRecord::Adapt(e) => f.push("error", variant_name(e)),
        }
    }
}

/// Per-direction statistics of an association.
#[derive(Debug, Clone, Default)]
pub struct DirStats {
    /// Initial TSN announced in the INIT or INIT ACK of this direction's sender.
    pub initial_tsn: Option<u32>,
    /// Lowest DATA TSN seen (first in serial order).
    pub first_tsn: Option<u32>,
    /// Highest DATA TSN seen (serial number arithmetic, RFC 1982).
    pub last_tsn: Option<u32>,
    /// DATA chunks (retransmissions included).
    pub data_chunks: u64,
    /// User data bytes (retransmissions excluded).
    pub data_bytes: u64,
    /// DATA chunks whose TSN had been seen before.
    pub retransmissions: u64,
    /// Complete user messages (DATA chunks with E set, retransmissions excluded).
    pub messages: u64,
    /// DATA chunks by PPID (retransmissions excluded).
    pub ppids: BTreeMap<u32, u64>,
    /// SACKs sent by this direction's sender.
    pub sacks: u64,
    /// Gap ack blocks reported in those SACKs.
    pub gap_blocks: u64,
    /// Duplicate TSNs reported in those SACKs.
    pub dup_tsns: u64,
    /// Highest cumulative TSN ack sent.
    pub cum_ack: Option<u32>,
    /// HEARTBEATs sent.
    pub heartbeats: u64,
    /// Addresses the sender announced in its INIT or INIT ACK.
    pub addresses: Vec<IpAddr>,
    seen: HashSet<u32>,
}

/// A path: one source and destination address pair in one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathUse {
    /// Direction.
    pub dir: Dir,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Packets sent along it.
    pub packets: u64,
    /// DATA chunks sent along it.
    pub data_chunks: u64,
    /// HEARTBEATs sent along it.
    pub heartbeats: u64,
    /// First and last frame that used it.
    pub frames: (u64, u64),
}

/// Lifecycle of an association as seen in the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssocState {
    /// INIT seen, no INIT ACK.
    InitOnly,
    /// INIT and INIT ACK seen, no COOKIE ACK.
    CookieWait,
    /// Handshake complete.
    Established,
    /// Packets seen without the handshake.
    NoSetupSeen,
    /// SHUTDOWN seen.
    ShuttingDown,
    /// SHUTDOWN COMPLETE seen.
    Closed,
    /// ABORT seen.
    Aborted,
}

impl AssocState {
    fn label(self) -> &'static str {
        match self {
            AssocState::InitOnly => "init only",
            AssocState::CookieWait => "no cookie ack",
            AssocState::Established => "established",
            AssocState::NoSetupSeen => "setup not captured",
            AssocState::ShuttingDown => "shutting down",
            AssocState::Closed => "closed",
            AssocState::Aborted => "aborted",
        }
    }
}

/// Direction index, stream, U bit and SSN of a user message being reassembled.
type FragKey = (usize, u16, bool, u16);
/// TSN, DATA flags and user data of one fragment.
type Fragment = (u32, u8, Vec<u8>);

/// Everything decoded of one association.
#[derive(Debug, Clone)]
pub struct Association {
    /// Number in the capture (1-based, order of first appearance).
    pub id: usize,
    /// Initiator's first address (the source of its INIT) and port.
    pub initiator: (IpAddr, u16),
    /// Responder's first address and port.
    pub responder: (IpAddr, u16),
    /// Tag the initiator expects (Initiate Tag of the INIT).
    pub tag_initiator: Option<u32>,
    /// Tag the responder expects (Initiate Tag of the INIT ACK).
    pub tag_responder: Option<u32>,
    /// Lifecycle.
    pub state: AssocState,
    /// Encapsulations seen.
    pub encaps: Vec<Encap>,
    /// Statistics for I>R and R>I.
    pub dirs: [DirStats; 2],
    /// Paths in order of first use.
    pub paths: Vec<PathUse>,
    /// Chunks by type.
    pub chunk_counts: BTreeMap<u8, u64>,
    /// Packets in capture order.
    pub events: Vec<PacketEvent>,
    /// Errors found.
    pub errors: u64,
    /// Warnings given.
    pub warnings: u64,
    /// Fragments of user messages awaiting their end, by (direction, stream, U, SSN; 0 for
    /// unordered fragments).
    reasm: HashMap<FragKey, Vec<Fragment>>,
}

/// The SCTP decode of one capture.
#[derive(Debug, Clone, Default)]
pub struct SctpReport {
    /// SCTP packets found.
    pub packets: u64,
    /// Of which UDP-encapsulated.
    pub udp_packets: u64,
    /// Associations.
    pub associations: Vec<Association>,
    /// Packets that could not be tied to an association (too short to have a header).
    pub orphans: Vec<(u64, Duration, String)>,
}

impl SctpReport {
    /// Errors in all associations and unattributable packets.
    pub fn errors(&self) -> u64 {
        self.associations.iter().map(|a| a.errors).sum::<u64>() + self.orphans.len() as u64
    }

    /// Warnings in all associations.
    pub fn warnings(&self) -> u64 {
        self.associations.iter().map(|a| a.warnings).sum()
    }

    /// Chunks by type over all associations.
    pub fn chunk_counts(&self) -> BTreeMap<u8, u64> {
        let mut total = BTreeMap::new();
        for a in &self.associations {
            for (t, n) in &a.chunk_counts {
                *total.entry(*t).or_insert(0) += n;
            }
        }
        total
    }

    /// Whether the capture held any SCTP.
    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }
}

/// The SCTP payload of a frame, if it carries one: addresses, encapsulation and bytes.
pub fn sctp_payload<'a>(
    frame: &'a Frame,
    udp_ports: &[u16],
) -> Option<(IpAddr, IpAddr, Encap, &'a [u8])> {
    match transport(frame) {
        Transport::OtherIp(src, dst, IPPROTO_SCTP, payload) => {
            Some((src, dst, Encap::RawIp, payload))
        }
        Transport::OtherIp(src, dst, IPPROTO_UDP, udp) if udp.len() >= 8 => {
            let sport = u16::from_be_bytes([udp[0], udp[1]]);
            let dport = u16::from_be_bytes([udp[2], udp[3]]);
            if !udp_ports.contains(&sport) && !udp_ports.contains(&dport) {
                return None;
            }
            // The UDP length bounds the datagram (Ethernet may pad short frames).
            let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
            let end = if ulen >= 8 {
                ulen.min(udp.len())
            } else {
                udp.len()
            };
            Some((src, dst, Encap::Udp(sport, dport), &udp[8..end]))
        }
        _ => None,
    }
}

/// Name of a chunk type, including the extensions the codec does not implement.
pub fn chunk_name(t: u8) -> &'static str {
    match t {
        0x0f => "AUTH",
        0x40 => "I-DATA",
        0x80 => "ASCONF ACK",
        0x81 => "ZERO CHECKSUM",
        0x82 => "RE-CONFIG",
        0x84 => "PAD",
        0xc0 => "FORWARD TSN",
        0xc1 => "ASCONF",
        0xc2 => "I-FORWARD TSN",
        _ => Chunk::name(t),
    }
}

/// Name of a PPID that matters here.
pub fn ppid_name(ppid: u32) -> Option<&'static str> {
    match ppid {
        PPID_DDP_SEGMENT => Some("DDP segment"),
        PPID_DDP_SESSION_CONTROL => Some("DDP stream session control"),
        PPID_SCTP_PERF_CONTROL => Some("sctp-perf control"),
        PPID_SCTP_PERF_DATA => Some("sctp-perf data"),
        _ => None,
    }
}

/// Decodes every SCTP packet in `frames`.
pub fn decode_frames(frames: &[Frame], opts: &SctpOptions) -> SctpReport {
    let mut rep = SctpReport::default();
    for f in frames {
        let Some((src, dst, encap, bytes)) = sctp_payload(f, &opts.udp_ports) else {
            continue;
        };
        rep.packets += 1;
        if matches!(encap, Encap::Udp(..)) {
            rep.udp_packets += 1;
        }
        decode_packet(&mut rep, f, src, dst, encap, bytes);
    }
    rep
}

fn new_assoc(id: usize, src: (IpAddr, u16), dst: (IpAddr, u16), state: AssocState) -> Association {
    Association {
        id,
        initiator: src,
        responder: dst,
        tag_initiator: None,
        tag_responder: None,
        state,
        encaps: Vec::new(),
        dirs: Default::default(),
        paths: Vec::new(),
        chunk_counts: BTreeMap::new(),
        events: Vec::new(),
        errors: 0,
        warnings: 0,
        reasm: HashMap::new(),
    }
}

/// Whether the first chunk of a packet carries the T bit (its tag is the sender's own).
fn reflected(payload: &[u8]) -> bool {
    // ABORT (6) and SHUTDOWN COMPLETE (14) with flag bit 0 (RFC 9260 §8.5.1).
    matches!(payload.get(12), Some(6 | 14)) && payload.get(13).is_some_and(|f| f & 1 != 0)
}

/// Finds the association and direction of a packet, or opens a new association.
fn locate(
    rep: &mut SctpReport,
    src: (IpAddr, u16),
    dst: (IpAddr, u16),
    hdr: &CommonHeader,
    first: Option<&Chunk<'_>>,
    t_bit: bool,
) -> (usize, Dir) {
    let is_init = matches!(first, Some(Chunk::Init(_)));
    if let Some(Chunk::Init(init)) = first {
        // A retransmitted INIT names the same tag.
        if let Some(i) = rep.associations.iter().position(|a| {
            a.initiator.1 == src.1
                && a.responder.1 == dst.1
                && a.tag_initiator == Some(init.initiate_tag)
        }) {
            return (i, Dir::ToResponder);
        }
    }
    if !is_init {
        let v = hdr.verification_tag;
        // Most recent association first: ports are reused by later associations.
        for (i, a) in rep.associations.iter().enumerate().rev() {
            let fwd = a.initiator.1 == src.1 && a.responder.1 == dst.1;
            let back = a.responder.1 == src.1 && a.initiator.1 == dst.1;
            // Tag the receiver expects, or with the T bit the sender's own.
            let (to_r, to_i) = if t_bit {
                (a.tag_initiator, a.tag_responder)
            } else {
                (a.tag_responder, a.tag_initiator)
            };
            if fwd && to_r == Some(v) {
                return (i, Dir::ToResponder);
            }
            if back && to_i == Some(v) {
                return (i, Dir::ToInitiator);
            }
            // The INIT ACK names the responder's tag.
            if back
                && a.tag_responder.is_none()
                && matches!(first, Some(Chunk::InitAck(_)))
                && a.tag_initiator == Some(v)
            {
                return (i, Dir::ToInitiator);
            }
        }
    }
    let id = rep.associations.len() + 1;
    let state = if is_init {
        AssocState::InitOnly
    } else {
        AssocState::NoSetupSeen
    };
    let mut a = new_assoc(id, src, dst, state);
    if !is_init {
        if t_bit {
            a.tag_initiator = Some(hdr.verification_tag);
        } else {
            a.tag_responder = Some(hdr.verification_tag);
        }
    }
    rep.associations.push(a);
    (id - 1, Dir::ToResponder)
}

fn decode_packet(
    rep: &mut SctpReport,
    f: &Frame,
    src: IpAddr,
    dst: IpAddr,
    encap: Encap,
    bytes: &[u8],
) {
    let Ok(pkt) = Packet::new_checked(bytes) else {
        rep.orphans.push((
            f.number,
            f.timestamp,
            format!(
                "{src} -> {dst}: {} bytes of SCTP, shorter than the 12-byte common header",
                bytes.len()
            ),
        ));
        return;
    };
    let hdr = pkt.header();
    let truncated = (f.data.len() as u64) < u64::from(f.orig_len);
    // Parse the chunks without the CRC first, to place the packet even when its CRC is bad.
    let parsed = parse_packet(bytes, false);
    let first = parsed.as_ref().ok().and_then(|p| p.chunks.first());
    let (ai, dir) = locate(
        rep,
        (src, hdr.src_port),
        (dst, hdr.dst_port),
        &hdr,
        first,
        reflected(bytes),
    );
    let a = &mut rep.associations[ai];
    if !a.encaps.contains(&encap) {
        a.encaps.push(encap);
    }
    let mut ev = PacketEvent {
        frame: f.number,
        timestamp: f.timestamp,
        dir,
        src,
        dst,
        encap,
        vtag: hdr.verification_tag,
        lines: Vec::new(),
    };
    let crc = if truncated {
        Err(None)
    } else {
        pkt.verify_checksum().map_err(Some)
    };
    match (crc, parsed) {
        (Err(None), _) => ev.lines.push(Line::new(SctpRecord::Truncated {
            captured: f.data.len(),
            original: f.orig_len,
        })),
        (Err(Some(e)), _) => ev.lines.push(Line::new(SctpRecord::BadChecksum(e))),
        (Ok(()), Err(e)) => ev.lines.push(Line::new(SctpRecord::Malformed(e))),
        (Ok(()), Ok(p)) => {
            note_path(a, dir, src, dst, f.number, &p.chunks);
            if matches!(p.chunks.first(), Some(Chunk::Init(_))) && hdr.verification_tag != 0 {
                ev.lines.push(Line::new(SctpRecord::InitTagNotZero {
                    vtag: hdr.verification_tag,
                }));
            }
            for c in &p.chunks {
                let is_retransmission =
                    matches!(c, Chunk::Data(d) if a.dirs[di(dir)].seen.contains(&d.tsn));
                *a.chunk_counts.entry(c.chunk_type()).or_insert(0) += 1;
                let line = describe_chunk(a, dir, c);
                ev.lines.push(Line::new(line));
                if let Chunk::Data(d) = c
                    && !is_retransmission
                {
                    ev.lines.extend(reassemble(a, dir, d));
                }
            }
            if p.chunks.is_empty() {
                ev.lines.push(Line::new(SctpRecord::NoChunks));
            }
        }
    }
    for l in &ev.lines {
        match l.kind {
            EventKind::Error => a.errors += 1,
            EventKind::Warning => a.warnings += 1,
            EventKind::Info => {}
        }
    }
    a.events.push(ev);
}

fn note_path(
    a: &mut Association,
    dir: Dir,
    src: IpAddr,
    dst: IpAddr,
    frame: u64,
    chunks: &[Chunk],
) {
    let data = chunks
        .iter()
        .filter(|c| matches!(c, Chunk::Data(_)))
        .count() as u64;
    let hb = chunks
        .iter()
        .filter(|c| matches!(c, Chunk::Heartbeat(_)))
        .count() as u64;
    if let Some(p) = a
        .paths
        .iter_mut()
        .find(|p| p.dir == dir && p.src == src && p.dst == dst)
    {
        p.packets += 1;
        p.data_chunks += data;
        p.heartbeats += hb;
        p.frames.1 = frame;
    } else {
        a.paths.push(PathUse {
            dir,
            src,
            dst,
            packets: 1,
            data_chunks: data,
            heartbeats: hb,
            frames: (frame, frame),
        });
    }
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToResponder => 0,
        Dir::ToInitiator => 1,
    }
}

/// `a` is after `b` in serial number arithmetic (RFC 9260 §1.6, RFC 1982).
fn serial_gt(a: u32, b: u32) -> bool {
    a != b && a.wrapping_sub(b) < 1 << 31
}

fn describe_chunk(a: &mut Association, dir: Dir, c: &Chunk<'_>) -> SctpRecord {
    let retransmission = matches!(c, Chunk::Data(d) if a.dirs[di(dir)].seen.contains(&d.tsn));
    let info = match c {
        Chunk::Data(d) => ChunkInfo::Data {
            tsn: d.tsn,
            stream: d.stream,
            ssn: d.ssn,
            ppid: d.ppid,
            len: d.data.len(),
            flags: d.flags,
            retransmission,
        },
        Chunk::Init(i) | Chunk::InitAck(i) => ChunkInfo::Init {
            initiate_tag: i.initiate_tag,
            a_rwnd: i.a_rwnd,
            outbound_streams: i.outbound_streams,
            inbound_streams: i.inbound_streams,
            initial_tsn: i.initial_tsn,
            addresses: addresses(i),
            adaptation: i.params.iter().find_map(|p| match p {
                Param::Unknown { code, value }
                    if *code == extra_param::ADAPTATION_LAYER_INDICATION =>
                {
                    Some(u32::from_be_bytes(value.as_slice().try_into().ok()?))
                }
                _ => None,
            }),
        },
        Chunk::Heartbeat(v) | Chunk::HeartbeatAck(v) => ChunkInfo::Opaque { len: v.len() },
        Chunk::CookieEcho(c) => ChunkInfo::Opaque { len: c.len() },
        Chunk::Sack(s) => ChunkInfo::Sack {
            cum_tsn_ack: s.cum_tsn_ack,
            a_rwnd: s.a_rwnd,
            gaps: s.gaps.len(),
            dups: s.dup_tsns.len(),
        },
        Chunk::Shutdown { cum_tsn_ack } => ChunkInfo::Shutdown {
            cum_tsn_ack: *cum_tsn_ack,
        },
        Chunk::Abort { t_bit, causes } => ChunkInfo::Causes {
            t_bit: *t_bit,
            causes: causes.iter().map(describe_cause).collect(),
        },
        Chunk::Error(causes) => ChunkInfo::Causes {
            t_bit: false,
            causes: causes.iter().map(describe_cause).collect(),
        },
        _ => ChunkInfo::Other,
    };
    SctpRecord::Chunk {
        chunk_type: c.chunk_type(),
        info,
        text: chunk_text(a, dir, c),
    }
}

fn chunk_text(a: &mut Association, dir: Dir, c: &Chunk<'_>) -> String {
    let st = &mut a.dirs[di(dir)];
    match c {
        Chunk::Data(d) => {
            let retx = !st.seen.insert(d.tsn);
            st.data_chunks += 1;
            if retx {
                st.retransmissions += 1;
            } else {
                st.data_bytes += d.data.len() as u64;
                *st.ppids.entry(d.ppid).or_insert(0) += 1;
                if d.end() {
                    st.messages += 1;
                }
            }
            if st.first_tsn.is_none_or(|f| serial_gt(f, d.tsn)) {
                st.first_tsn = Some(d.tsn);
            }
            if st.last_tsn.is_none_or(|l| serial_gt(d.tsn, l)) {
                st.last_tsn = Some(d.tsn);
            }
            let mut t = format!(
                "DATA TSN {} SID {} SSN {} PPID {}",
                d.tsn, d.stream, d.ssn, d.ppid
            );
            if let Some(n) = ppid_name(d.ppid) {
                let _ = write!(t, " ({n})");
            }
            let _ = write!(t, " len {} flags {}", d.data.len(), data_flags(d));
            if retx {
                t.push_str(" RETRANSMISSION");
            }
            t
        }
        Chunk::Init(i) => {
            a.tag_initiator = Some(i.initiate_tag);
            st.initial_tsn = Some(i.initial_tsn);
            st.addresses = addresses(i);
            format!("INIT {}", describe_init(i))
        }
        Chunk::InitAck(i) => {
            a.tag_responder = Some(i.initiate_tag);
            st.initial_tsn = Some(i.initial_tsn);
            st.addresses = addresses(i);
            if a.state == AssocState::InitOnly {
                a.state = AssocState::CookieWait;
            }
            format!("INIT ACK {}", describe_init(i))
        }
        Chunk::Sack(s) => {
            st.sacks += 1;
            st.gap_blocks += s.gaps.len() as u64;
            st.dup_tsns += s.dup_tsns.len() as u64;
            if st.cum_ack.is_none_or(|c| serial_gt(s.cum_tsn_ack, c)) {
                st.cum_ack = Some(s.cum_tsn_ack);
            }
            describe_sack(s)
        }
        Chunk::Heartbeat(info) => {
            st.heartbeats += 1;
            format!("HEARTBEAT info {} bytes", info.len())
        }
        Chunk::HeartbeatAck(info) => format!("HEARTBEAT ACK info {} bytes", info.len()),
        Chunk::Abort { t_bit, causes } => {
            a.state = AssocState::Aborted;
            format!("ABORT{} {}", t_flag(*t_bit), describe_causes(causes))
        }
        Chunk::Shutdown { cum_tsn_ack } => {
            if a.state != AssocState::Aborted {
                a.state = AssocState::ShuttingDown;
            }
            format!("SHUTDOWN cum TSN ack {cum_tsn_ack}")
        }
        Chunk::ShutdownAck => "SHUTDOWN ACK".into(),
        Chunk::Error(causes) => format!("ERROR {}", describe_causes(causes)),
        Chunk::CookieEcho(c) => format!("COOKIE ECHO cookie {} bytes", c.len()),
        Chunk::CookieAck => {
            if matches!(a.state, AssocState::InitOnly | AssocState::CookieWait) {
                a.state = AssocState::Established;
            }
            "COOKIE ACK".into()
        }
        Chunk::ShutdownComplete { t_bit } => {
            if a.state != AssocState::Aborted {
                a.state = AssocState::Closed;
            }
            format!("SHUTDOWN COMPLETE{}", t_flag(*t_bit))
        }
        Chunk::Unknown {
            chunk_type,
            flags,
            value,
        } => format!(
            "{} (type {chunk_type:#04x}) flags {flags:#04x} value {} bytes",
            chunk_name(*chunk_type),
            value.len()
        ),
    }
}

fn t_flag(t: bool) -> &'static str {
    if t { " [T]" } else { "" }
}

fn data_flags(d: &DataChunk<'_>) -> String {
    let mut s = String::new();
    for (on, c) in [
        (d.immediate(), 'I'),
        (d.unordered(), 'U'),
        (d.beginning(), 'B'),
        (d.end(), 'E'),
    ] {
        if on {
            s.push(c);
        }
    }
    if s.is_empty() {
        s.push('-');
    }
    s
}

fn addresses(i: &InitChunk) -> Vec<IpAddr> {
    i.params
        .iter()
        .filter_map(|p| match p {
            Param::Ipv4(a) => Some(IpAddr::V4(*a)),
            Param::Ipv6(a) => Some(IpAddr::V6(*a)),
            _ => None,
        })
        .collect()
}

fn describe_init(i: &InitChunk) -> String {
    let mut t = format!(
        "tag {:#010x} a_rwnd {} OS {} MIS {} initial TSN {}",
        i.initiate_tag, i.a_rwnd, i.outbound_streams, i.inbound_streams, i.initial_tsn
    );
    let params: Vec<String> = i.params.iter().map(describe_param).collect();
    if !params.is_empty() {
        let _ = write!(t, "; {}", params.join(", "));
    }
    t
}

fn u16_list(v: &[u8]) -> Vec<u16> {
    v.chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect()
}

fn describe_param(p: &Param) -> String {
    use extra_param::*;
    match p {
        Param::HeartbeatInfo(v) => format!("heartbeat info {} bytes", v.len()),
        Param::Ipv4(a) => format!("IPv4 {a}"),
        Param::Ipv6(a) => format!("IPv6 {a}"),
        Param::StateCookie(c) => format!("state cookie {} bytes", c.len()),
        Param::UnrecognizedParam(v) => match sctp::wire::parse_tlvs(v).ok().as_deref() {
            // The whole unrecognized TLV of the INIT comes back (RFC 9260 §3.3.3.1).
            Some([t, ..]) => format!(
                "unrecognized parameter {:#06x} ({})",
                t.code,
                describe_param(&Param::parse(t).unwrap_or(Param::Unknown {
                    code: t.code,
                    value: t.value.to_vec(),
                }))
            ),
            _ => format!("unrecognized parameter ({} bytes)", v.len()),
        },
        Param::CookiePreservative(ms) => format!("cookie preservative {ms} ms"),
        Param::HostNameAddress(v) => format!("host name {:?}", String::from_utf8_lossy(v)),
        Param::SupportedAddressTypes(types) => {
            let names: Vec<String> = types
                .iter()
                .map(|t| match *t {
                    5 => "IPv4".to_string(),
                    6 => "IPv6".to_string(),
                    11 => "host name".to_string(),
                    o => format!("{o}"),
                })
                .collect();
            format!("supported address types {}", names.join("/"))
        }
        Param::EcnCapable => "ECN capable".into(),
        Param::Unknown { code, value } => match *code {
            ADAPTATION_LAYER_INDICATION if value.len() == 4 => {
                let v = u32::from_be_bytes([value[0], value[1], value[2], value[3]]);
                let what = if v == sctp::ddp_adapt::ADAPTATION_DDP {
                    " (DDP, RFC 5043)"
                } else {
                    ""
                };
                format!("adaptation layer indication {v:#010x}{what}")
            }
            FORWARD_TSN_SUPPORTED => "forward TSN supported".into(),
            SUPPORTED_EXTENSIONS => {
                let names: Vec<&str> = value.iter().map(|t| chunk_name(*t)).collect();
                format!("supported extensions {}", names.join("/"))
            }
            RANDOM => format!("random {} bytes", value.len()),
            CHUNK_LIST => {
                let names: Vec<&str> = value.iter().map(|t| chunk_name(*t)).collect();
                format!("auth chunk list {}", names.join("/"))
            }
            HMAC_ALGO => format!("HMAC algorithms {:?}", u16_list(value)),
            PADDING => format!("padding {} bytes", value.len()),
            ZERO_CHECKSUM if value.len() == 4 => format!(
                "zero checksum acceptable (method {})",
                u32::from_be_bytes([value[0], value[1], value[2], value[3]])
            ),
            c => format!("parameter {c:#06x} {} bytes", value.len()),
        },
    }
}

fn describe_sack(s: &SackChunk) -> String {
    let mut t = format!("SACK cum TSN ack {} a_rwnd {}", s.cum_tsn_ack, s.a_rwnd);
    if s.flags & sctp::wire::SACK_FLAG_CMT_DAC != 0 {
        t.push_str(" CMT-DAC (two or more packets acknowledged)");
    }
    if s.flags & !sctp::wire::SACK_FLAG_CMT_DAC != 0 {
        t.push_str(&format!(" reserved flags 0x{:02x}", s.flags));
    }
    if !s.gaps.is_empty() {
        let gaps: Vec<String> = s
            .gaps
            .iter()
            .map(|g| {
                format!(
                    "{}-{}",
                    s.cum_tsn_ack.wrapping_add(u32::from(g.start)),
                    s.cum_tsn_ack.wrapping_add(u32::from(g.end))
                )
            })
            .collect();
        let _ = write!(t, " gaps {}", gaps.join(" "));
    }
    if !s.dup_tsns.is_empty() {
        let dups: Vec<String> = s.dup_tsns.iter().map(u32::to_string).collect();
        let _ = write!(t, " dups {}", dups.join(" "));
    }
    t
}

/// Name and details of an error cause (RFC 9260 §3.3.10).
pub fn describe_cause(c: &ErrorCause) -> String {
    let text = |v: &[u8]| {
        if v.is_empty() {
            String::new()
        } else if v.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            format!(" {:?}", String::from_utf8_lossy(v))
        } else {
            format!(" ({} bytes)", v.len())
        }
    };
    match c {
        ErrorCause::InvalidStreamId { stream } => format!("invalid stream identifier {stream}"),
        ErrorCause::MissingMandatoryParam(l) => format!("missing mandatory parameters {l:?}"),
        ErrorCause::StaleCookie { staleness_us } => format!("stale cookie by {staleness_us} us"),
        ErrorCause::OutOfResource => "out of resource".into(),
        ErrorCause::UnresolvableAddress(v) => format!("unresolvable address ({} bytes)", v.len()),
        ErrorCause::UnrecognizedChunk(v) => format!(
            "unrecognized chunk type {}",
            v.first().map_or("?".into(), |t| format!("{t:#04x}"))
        ),
        ErrorCause::InvalidMandatoryParam => "invalid mandatory parameter".into(),
        ErrorCause::UnrecognizedParams(v) => {
            let codes: Vec<String> = sctp::wire::parse_tlvs(v)
                .map(|l| l.iter().map(|t| format!("{:#06x}", t.code)).collect())
                .unwrap_or_default();
            format!("unrecognized parameters {}", codes.join(" "))
        }
        ErrorCause::NoUserData { tsn } => format!("no user data in TSN {tsn}"),
        ErrorCause::CookieWhileShuttingDown => "cookie received while shutting down".into(),
        ErrorCause::RestartWithNewAddresses(v) => {
            format!("restart with new addresses ({} bytes)", v.len())
        }
        ErrorCause::UserInitiatedAbort(v) => format!("user-initiated abort{}", text(v)),
        ErrorCause::ProtocolViolation(v) => format!("protocol violation{}", text(v)),
        ErrorCause::Unknown { code, info } => {
            format!("cause {code:#06x} ({} bytes)", info.len())
        }
    }
}

fn describe_causes(causes: &[ErrorCause]) -> String {
    if causes.is_empty() {
        return "(no cause)".into();
    }
    causes
        .iter()
        .map(describe_cause)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Collects the fragments of DDP-over-SCTP user messages (PPID 16 and 17) and decodes each
/// complete one with the RFC 5043 adaptation layer ([`sctp::ddp_adapt::parse`]): a DDP
/// Segment Chunk (DDP-SSN, then the DDP segment, shown as DDP + RDMAP) or a DDP Stream
/// Session Control message.
fn reassemble(a: &mut Association, dir: Dir, d: &DataChunk<'_>) -> Vec<Line> {
    if d.ppid != PPID_DDP_SEGMENT && d.ppid != PPID_DDP_SESSION_CONTROL {
        return Vec::new();
    }
    let mut out = Vec::new();
    if !d.unordered() && d.beginning() {
        out.push(Line::new(SctpRecord::DdpOrdered));
    }
    if let Some(whole) = collect(a, dir, d) {
        out.push(Line::new(describe_ddp(d.ppid, &whole)));
    }
    out
}

fn describe_ddp(ppid: u32, whole: &[u8]) -> SctpRecord {
    use sctp::ddp_adapt::{DdpSctpMessage, parse};
    match parse(ppid, whole) {
        Ok(DdpSctpMessage::Segment(seg)) => match seg.rdmap() {
            Ok(m) => SctpRecord::DdpSegment {
                ddp_ssn: seg.ddp_ssn,
                header: m.header,
                payload_len: m.payload.len(),
            },
            Err(error) => SctpRecord::DdpInvalid {
                ddp_ssn: seg.ddp_ssn,
                len: seg.segment.len(),
                error,
            },
        },
        Ok(DdpSctpMessage::Control(c)) => SctpRecord::DdpControl {
            ddp_ssn: c.ddp_ssn,
            function: c.function,
            private_data_len: c.private_data.len(),
            // RFC 6581 §7: an enhanced message's private data starts with IRD/ORD.
            enhanced: mpa::EnhancedData::parse(&c.private_data)
                .filter(|_| c.function.is_enhanced()),
        },
        Err(e) => SctpRecord::Adapt(e),
    }
}

/// The whole user message once all its fragments are there: a B fragment, consecutive TSNs,
/// an E fragment (RFC 9260 §6.9). Ordered fragments wait per stream and SSN; unordered ones
/// per stream only, since their SSN means nothing (§6.6), and the TSN run around the new
/// fragment decides which message it completes — two unordered messages on one stream stay
/// apart even when their fragments arrive interleaved.
fn collect(a: &mut Association, dir: Dir, d: &DataChunk<'_>) -> Option<Vec<u8>> {
    if d.beginning() && d.end() {
        return Some(d.data.to_vec());
    }
    let ssn = if d.unordered() { 0 } else { d.ssn };
    let key = (di(dir), d.stream, d.unordered(), ssn);
    let frags = a.reasm.entry(key).or_default();
    if frags.iter().any(|(t, _, _)| *t == d.tsn) {
        return None;
    }
    frags.push((d.tsn, d.flags, d.data.to_vec()));
    let flags_of = |tsn: u32| frags.iter().find(|(t, _, _)| *t == tsn).map(|(_, f, _)| *f);
    const B: u8 = 0x02;
    const E: u8 = 0x01;
    // Back to the B fragment and forward to the E fragment, through consecutive TSNs that
    // belong to this message (no E before it, no B after it).
    let mut first = d.tsn;
    while flags_of(first)? & B == 0 {
        let prev = first.wrapping_sub(1);
        if flags_of(prev)? & E != 0 {
            return None;
        }
        first = prev;
    }
    let mut last = d.tsn;
    while flags_of(last)? & E == 0 {
        let next = last.wrapping_add(1);
        if flags_of(next)? & B != 0 {
            return None;
        }
        last = next;
    }
    let n = last.wrapping_sub(first) as usize + 1;
    let mut run: Vec<(u32, u8, Vec<u8>)> = Vec::with_capacity(n);
    let mut rest = Vec::with_capacity(frags.len().saturating_sub(n));
    for f in frags.drain(..) {
        if f.0.wrapping_sub(first) < n as u32 {
            run.push(f);
        } else {
            rest.push(f);
        }
    }
    *frags = rest;
    if frags.is_empty() {
        a.reasm.remove(&key);
    }
    run.sort_by_key(|(t, _, _)| t.wrapping_sub(first));
    Some(run.into_iter().flat_map(|(_, _, v)| v).collect())
}

fn dir_arrow(d: Dir) -> &'static str {
    match d {
        Dir::ToResponder => "I>R",
        Dir::ToInitiator => "R>I",
    }
}

fn tsn_range(s: &DirStats) -> String {
    match (s.first_tsn, s.last_tsn) {
        (Some(f), Some(l)) => format!("{f}..{l}"),
        _ => "-".into(),
    }
}

/// Prints the per-chunk-type totals, one `sctp 0xNN NAME count` line each.
pub fn print_counts(rep: &SctpReport, out: &mut dyn Write) -> io::Result<()> {
    for (t, n) in rep.chunk_counts() {
        writeln!(out, "sctp {t:#04x} {} {n}", chunk_name(t).replace(' ', "-"))?;
    }
    Ok(())
}

/// Prints the packets (when `frames`) and the association summaries (when `summary`).
pub fn print_report(
    name: &str,
    rep: &SctpReport,
    opts: &SctpOptions,
    frames: bool,
    summary: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    if rep.is_empty() {
        return Ok(());
    }
    let selected = |a: &&Association| opts.assoc.is_none_or(|n| n == a.id);
    if frames {
        for (frame, _, text) in &rep.orphans {
            writeln!(out, "\nframe {frame}: ERROR: {text}")?;
        }
        for a in rep.associations.iter().filter(selected) {
            writeln!(
                out,
                "\nassociation {}: {}:{} (initiator) <-> {}:{} (responder), {}",
                a.id,
                a.initiator.0,
                a.initiator.1,
                a.responder.0,
                a.responder.1,
                encaps_label(a)
            )?;
            let t0 = a.events.first().map_or(Duration::ZERO, |e| e.timestamp);
            for e in &a.events {
                writeln!(
                    out,
                    "  frame {:>6} {:>+11.6} {}  {} -> {} vtag {:#010x}{}",
                    e.frame,
                    e.timestamp.saturating_sub(t0).as_secs_f64(),
                    dir_arrow(e.dir),
                    e.src,
                    e.dst,
                    e.vtag,
                    match e.encap {
                        Encap::RawIp => String::new(),
                        u => format!(" ({})", u.label()),
                    }
                )?;
                for Line { kind, text: l, .. } in &e.lines {
                    let mark = match kind {
                        EventKind::Info => "",
                        EventKind::Warning => "WARNING: ",
                        EventKind::Error => "ERROR: ",
                    };
                    writeln!(out, "{:>30}{mark}{l}", "")?;
                }
            }
        }
    }
    if !summary {
        return Ok(());
    }
    writeln!(out, "\nSCTP summary of {name}:")?;
    for a in rep.associations.iter().filter(selected) {
        writeln!(
            out,
            "association {}: {}:{} -> {}:{}  {}  {}  tags I {} R {}  errors {} warnings {}",
            a.id,
            a.initiator.0,
            a.initiator.1,
            a.responder.0,
            a.responder.1,
            encaps_label(a),
            a.state.label(),
            a.tag_initiator.map_or("-".into(), |t| format!("{t:#010x}")),
            a.tag_responder.map_or("-".into(), |t| format!("{t:#010x}")),
            a.errors,
            a.warnings
        )?;
        for (d, s) in [Dir::ToResponder, Dir::ToInitiator].iter().zip(&a.dirs) {
            let ppids: Vec<String> = s
                .ppids
                .iter()
                .map(|(p, n)| match ppid_name(*p) {
                    Some(nm) => format!("{p} ({nm}) {n}"),
                    None => format!("{p} {n}"),
                })
                .collect();
            writeln!(
                out,
                "  {}  TSN {}  DATA {} chunks {} bytes {} messages, {} retransmitted  SACK {} (gaps {}, dups {}) cum ack {}  HB {}{}{}",
                dir_arrow(*d),
                tsn_range(s),
                s.data_chunks,
                s.data_bytes,
                s.messages,
                s.retransmissions,
                s.sacks,
                s.gap_blocks,
                s.dup_tsns,
                s.cum_ack.map_or("-".into(), |c| c.to_string()),
                s.heartbeats,
                if ppids.is_empty() {
                    String::new()
                } else {
                    format!("  PPID {}", ppids.join(", "))
                },
                if s.addresses.is_empty() {
                    String::new()
                } else {
                    let a: Vec<String> = s.addresses.iter().map(IpAddr::to_string).collect();
                    format!("  INIT addresses {}", a.join(" "))
                }
            )?;
        }
        for p in &a.paths {
            writeln!(
                out,
                "  path {} {} -> {}: {} packets, {} DATA, {} HEARTBEAT, frames {}-{}",
                dir_arrow(p.dir),
                p.src,
                p.dst,
                p.packets,
                p.data_chunks,
                p.heartbeats,
                p.frames.0,
                p.frames.1
            )?;
        }
        let counts: Vec<String> = a
            .chunk_counts
            .iter()
            .map(|(t, n)| format!("{} {n}", chunk_name(*t)))
            .collect();
        writeln!(out, "  chunks: {}", counts.join(", "))?;
    }
    let counts: Vec<String> = rep
        .chunk_counts()
        .iter()
        .map(|(t, n)| format!("{} {n}", chunk_name(*t)))
        .collect();
    writeln!(
        out,
        "SCTP total: {} packets ({} over UDP), {} associations; {} errors, {} warnings",
        rep.packets,
        rep.udp_packets,
        rep.associations.len(),
        rep.errors(),
        rep.warnings()
    )?;
    writeln!(out, "SCTP chunks: {}", counts.join(", "))?;
    Ok(())
}

fn encaps_label(a: &Association) -> String {
    a.encaps
        .iter()
        .map(|e| e.label())
        .collect::<Vec<_>>()
        .join(" + ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::LinkType;
    use etherparse::{IpNumber, PacketBuilder};
    use sctp::wire::{GapBlock, build_packet};
    use std::net::Ipv4Addr;

    const A1: [u8; 4] = [10, 99, 0, 1];
    const A2: [u8; 4] = [10, 99, 1, 1];
    const B1: [u8; 4] = [10, 99, 0, 2];
    const B2: [u8; 4] = [10, 99, 1, 2];
    const TAG_A: u32 = 0x1111_1111;
    const TAG_B: u32 = 0x2222_2222;

    /// A raw-IP capture frame carrying `sctp` over IPv4 or, with `udp`, over UDP.
    fn frame(n: u64, src: [u8; 4], dst: [u8; 4], udp: Option<(u16, u16)>, sctp: &[u8]) -> Frame {
        let mut data = Vec::new();
        let b = PacketBuilder::ipv4(src, dst, 64);
        match udp {
            Some((s, d)) => b.udp(s, d).write(&mut data, sctp).unwrap(),
            None => b.write(&mut data, IpNumber(IPPROTO_SCTP), sctp).unwrap(),
        }
        let orig_len = data.len() as u32;
        Frame {
            number: n,
            timestamp: Duration::from_millis(n),
            link: LinkType::RawIp,
            data,
            orig_len,
        }
    }

    fn pkt(sport: u16, dport: u16, vtag: u32, chunks: &[Chunk<'_>]) -> Vec<u8> {
        let h = CommonHeader {
            src_port: sport,
            dst_port: dport,
            verification_tag: vtag,
        };
        build_packet(&h, chunks)
    }

    fn init(tag: u32, tsn: u32, addrs: &[[u8; 4]]) -> InitChunk {
        InitChunk {
            initiate_tag: tag,
            a_rwnd: 65536,
            outbound_streams: 4,
            inbound_streams: 4,
            initial_tsn: tsn,
            params: addrs
                .iter()
                .map(|a| Param::Ipv4(Ipv4Addr::from(*a)))
                .chain([Param::Unknown {
                    code: 0xc006,
                    value: vec![0, 0, 0, 1],
                }])
                .collect(),
        }
    }

    fn data(tsn: u32, ssn: u16, ppid: u32, flags: u8, bytes: &[u8]) -> Chunk<'_> {
        Chunk::Data(DataChunk {
            flags,
            tsn,
            stream: 0,
            ssn,
            ppid,
            data: bytes,
        })
    }

    /// Frame `n` of the association below from A to B (port 5000 -> 6000, B's tag), sent
    /// from `src` to `dst`.
    fn a_to_b(n: u64, src: [u8; 4], dst: [u8; 4], chunks: &[Chunk<'_>]) -> Frame {
        frame(n, src, dst, None, &pkt(5000, 6000, TAG_B, chunks))
    }

    /// Frame `n` of the association below from B to A (port 6000 -> 5000, A's tag), sent
    /// from `src` to `dst`.
    fn b_to_a(n: u64, src: [u8; 4], dst: [u8; 4], chunks: &[Chunk<'_>]) -> Frame {
        frame(n, src, dst, None, &pkt(6000, 5000, TAG_A, chunks))
    }

    /// A SACK up to `cum_tsn_ack` with `gaps`, a_rwnd 1.
    fn sack(cum_tsn_ack: u32, gaps: Vec<GapBlock>) -> Chunk<'static> {
        Chunk::Sack(SackChunk {
            flags: 0,
            cum_tsn_ack,
            a_rwnd: 1,
            gaps,
            dup_tsns: vec![],
        })
    }

    /// The handshake of an association A (port 5000, two addresses) -> B (port 6000).
    fn handshake() -> Vec<Frame> {
        vec![
            frame(
                1,
                A1,
                B1,
                None,
                &pkt(5000, 6000, 0, &[Chunk::Init(init(TAG_A, 100, &[A1, A2]))]),
            ),
            frame(
                2,
                B1,
                A1,
                None,
                &pkt(
                    6000,
                    5000,
                    TAG_A,
                    &[Chunk::InitAck(init(TAG_B, 900, &[B1, B2]))],
                ),
            ),
            a_to_b(3, A1, B1, &[Chunk::CookieEcho(b"cookie")]),
            b_to_a(4, B1, A1, &[Chunk::CookieAck]),
        ]
    }

    fn decode(frames: &[Frame]) -> SctpReport {
        decode_frames(frames, &SctpOptions::default())
    }

    fn text(rep: &SctpReport, opts: &SctpOptions) -> String {
        let mut out = Vec::new();
        print_report("t", rep, opts, true, true, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// RFC 9260 §5.1 and §8.5: the INIT and INIT ACK name the tags, later packets are placed
    /// by the tag of their receiver; addresses of INIT/INIT ACK (§3.3.2.1) are reported.
    #[test]
    fn rfc9260_s8_5_packets_follow_the_verification_tags() {
        let mut f = handshake();
        f.push(a_to_b(5, A1, B1, &[data(100, 0, 0, 3, b"hello")]));
        f.push(b_to_a(6, B1, A1, &[sack(100, vec![])]));
        let rep = decode(&f);
        assert_eq!(rep.associations.len(), 1);
        let a = &rep.associations[0];
        assert_eq!(a.state, AssocState::Established);
        assert_eq!(
            (a.tag_initiator, a.tag_responder),
            (Some(TAG_A), Some(TAG_B))
        );
        assert_eq!(
            a.dirs[0].addresses,
            vec![IpAddr::from(A1), IpAddr::from(A2)]
        );
        assert_eq!(
            a.dirs[1].addresses,
            vec![IpAddr::from(B1), IpAddr::from(B2)]
        );
        assert_eq!(a.dirs[0].data_bytes, 5);
        assert_eq!(a.dirs[1].cum_ack, Some(100));
        assert_eq!(a.errors, 0);
        let t = text(&rep, &SctpOptions::default());
        assert!(
            t.contains("adaptation layer indication 0x00000001 (DDP, RFC 5043)"),
            "{t}"
        );
        assert!(t.contains("IPv4 10.99.1.1"), "{t}");
        // The INIT's record: tag, TSN, addresses and the adaptation indication, typed.
        let init = &a.events[0].lines[0].record;
        let Record::Sctp(SctpRecord::Chunk {
            chunk_type: 1,
            info:
                ChunkInfo::Init {
                    initiate_tag,
                    initial_tsn,
                    addresses,
                    adaptation,
                    ..
                },
            ..
        }) = init
        else {
            panic!("{init:?}")
        };
        assert_eq!((*initiate_tag, *initial_tsn), (TAG_A, 100));
        assert_eq!(addresses, &[IpAddr::from(A1), IpAddr::from(A2)]);
        assert_eq!(*adaptation, Some(sctp::ddp_adapt::ADAPTATION_DDP));
        let f = init.fields();
        assert_eq!(
            f.get("addresses"),
            Some(&crate::Value::from("10.99.0.1 10.99.1.1"))
        );
        assert_eq!(init.layer(), Layer::Sctp);
    }

    /// RFC 9260 §3.3.3.1: an INIT ACK returns unrecognized INIT parameters whole; the decode
    /// names the parameter type that came back.
    #[test]
    fn rfc9260_s3_3_3_1_unrecognized_parameter_is_named() {
        let mut ack = init(TAG_B, 900, &[B1]);
        // Forward-TSN-Supported (type 0xC000, no value) as an INIT would carry it.
        ack.params
            .push(Param::UnrecognizedParam(vec![0xc0, 0, 0, 4]));
        let mut f = handshake();
        f[1] = b_to_a(2, B1, A1, &[Chunk::InitAck(ack)]);
        let t = text(&decode(&f), &SctpOptions::default());
        assert!(
            t.contains("unrecognized parameter 0xc000 (forward TSN supported)"),
            "{t}"
        );
    }

    /// RFC 9260 §6.8: a packet with a wrong CRC32c is an error of the decode.
    #[test]
    fn rfc9260_s6_8_bad_crc_is_an_error() {
        let mut bad = pkt(5000, 6000, TAG_B, &[data(100, 0, 0, 3, b"hello")]);
        let last = bad.len() - 4;
        bad[last] ^= 0x20;
        let mut f = handshake();
        f.push(frame(5, A1, B1, None, &bad));
        let rep = decode(&f);
        assert_eq!(rep.errors(), 1);
        // The discarded packet counts for nothing.
        assert_eq!(rep.associations[0].dirs[0].data_chunks, 0);
        assert!(text(&rep, &SctpOptions::default()).contains("ERROR: CRC32c mismatch"));
    }

    /// A chunk whose length runs past the packet is malformed (RFC 9260 §3.2), not a panic.
    #[test]
    fn rfc9260_s3_2_malformed_chunk_is_an_error() {
        let mut p = pkt(5000, 6000, TAG_B, &[Chunk::CookieAck]);
        p[14..16].copy_from_slice(&200u16.to_be_bytes());
        sctp::wire::finish_packet(&mut p);
        let rep = decode(&[frame(1, A1, B1, None, &p)]);
        assert_eq!(rep.errors(), 1);
        let short = decode(&[frame(1, A1, B1, None, &[1, 2, 3])]);
        assert_eq!(short.errors(), 1);
    }

    /// RFC 9260 §8.5.1: an INIT must carry verification tag 0.
    #[test]
    fn rfc9260_s8_5_1_init_with_nonzero_tag_is_an_error() {
        let p = pkt(5000, 6000, 7, &[Chunk::Init(init(TAG_A, 1, &[]))]);
        assert_eq!(decode(&[frame(1, A1, B1, None, &p)]).errors(), 1);
    }

    /// Multihoming (RFC 9260 §6.4): DATA retransmitted on the alternate path shows as a
    /// retransmission, and both paths are listed; SACK gap blocks are shown as TSN ranges.
    #[test]
    fn rfc9260_s6_4_paths_and_retransmissions() {
        let mut f = handshake();
        f.push(a_to_b(5, A1, B1, &[data(100, 0, 0, 3, b"one")]));
        f.push(a_to_b(6, A1, B1, &[data(101, 1, 0, 3, b"two")]));
        f.push(b_to_a(
            7,
            B1,
            A1,
            &[sack(99, vec![GapBlock { start: 2, end: 2 }])],
        ));
        // TSN 100 again, on the second path.
        f.push(a_to_b(8, A2, B2, &[data(100, 0, 0, 3, b"one")]));
        f.push(b_to_a(9, B2, A2, &[Chunk::Heartbeat(vec![1, 2])]));
        let rep = decode(&f);
        let a = &rep.associations[0];
        assert_eq!(a.dirs[0].data_chunks, 3);
        assert_eq!(a.dirs[0].retransmissions, 1);
        assert_eq!(a.dirs[0].data_bytes, 6);
        assert_eq!(
            (a.dirs[0].first_tsn, a.dirs[0].last_tsn),
            (Some(100), Some(101))
        );
        assert_eq!(a.dirs[1].gap_blocks, 1);
        let i2r: Vec<(IpAddr, IpAddr, u64)> = a
            .paths
            .iter()
            .filter(|p| p.dir == Dir::ToResponder)
            .map(|p| (p.src, p.dst, p.data_chunks))
            .collect();
        assert_eq!(
            i2r,
            vec![(A1.into(), B1.into(), 2), (A2.into(), B2.into(), 1)]
        );
        let t = text(&rep, &SctpOptions::default());
        assert!(t.contains("gaps 101-101"), "{t}");
        assert!(t.contains("RETRANSMISSION"), "{t}");
        assert!(t.contains("path R>I 10.99.1.2 -> 10.99.1.1"), "{t}");
    }

    /// RFC 9260 §8.5.1 (B): an ABORT with the T bit carries the sender's own tag.
    #[test]
    fn rfc9260_s8_5_1_reflected_abort_is_placed_by_the_sender_tag() {
        let mut f = handshake();
        let abort = Chunk::Abort {
            t_bit: true,
            causes: vec![ErrorCause::UserInitiatedAbort(b"bye".to_vec())],
        };
        f.push(frame(5, B1, A1, None, &pkt(6000, 5000, TAG_B, &[abort])));
        let rep = decode(&f);
        assert_eq!(rep.associations.len(), 1);
        assert_eq!(rep.associations[0].state, AssocState::Aborted);
        let t = text(&rep, &SctpOptions::default());
        assert!(
            t.contains("R>I") && t.contains("ABORT [T] user-initiated abort \"bye\""),
            "{t}"
        );
    }

    /// RFC 6951 §5: UDP-encapsulated SCTP is recognised on 9899 and on ports given.
    #[test]
    fn rfc6951_udp_encapsulation_ports() {
        let p = pkt(5000, 6000, 0, &[Chunk::Init(init(TAG_A, 1, &[]))]);
        let f = [frame(1, A1, B1, Some((4000, 4000)), &p)];
        assert!(decode(&f).is_empty());
        let opts = SctpOptions {
            udp_ports: vec![4000],
            assoc: None,
        };
        let rep = decode_frames(&f, &opts);
        assert_eq!((rep.packets, rep.udp_packets), (1, 1));
        assert_eq!(rep.associations[0].encaps, vec![Encap::Udp(4000, 4000)]);
    }

    /// RFC 5043 §5.2: PPID 16 user messages are a DDP-SSN and a DDP segment, PPID 17 ones
    /// DDP Stream Session Control; fragments are joined (B..E) and decoded; §10: they must
    /// be sent unordered.
    #[test]
    fn rfc5043_ppid16_messages_decode_as_ddp() {
        // DDP-SSN 5, then untagged DDP (T=0, L=1, DV=1) + RDMAP Send (RV=1, opcode 3):
        // QN 0, MSN 1, MO 0.
        let mut seg = vec![0, 5, 0x41, 0x43, 0, 0, 0, 0];
        seg.extend_from_slice(&0u32.to_be_bytes());
        seg.extend_from_slice(&1u32.to_be_bytes());
        seg.extend_from_slice(&0u32.to_be_bytes());
        seg.extend_from_slice(&[0xab; 30]);
        let (p1, p2) = seg.split_at(10);
        // DDP-SSN 6, Session Accept (function 2), 3 bytes of private data.
        let ctl = [0, 6, 0, 2, b'a', b'b', b'c'];
        let d = |tsn, ssn, ppid, flags, b| {
            a_to_b(u64::from(tsn), A1, B1, &[data(tsn, ssn, ppid, flags, b)])
        };
        let mut f = handshake();
        f.push(d(100, 0, PPID_DDP_SEGMENT, 6, p1));
        f.push(d(101, 0, PPID_DDP_SEGMENT, 5, p2));
        f.push(d(102, 0, PPID_DDP_SESSION_CONTROL, 7, &ctl));
        // Garbage with PPID 16 is an error, and so is sending it ordered.
        f.push(d(103, 1, PPID_DDP_SEGMENT, 3, &[0, 1, 0xff, 0xff]));
        let rep = decode(&f);
        let t = text(&rep, &SctpOptions::default());
        assert!(t.contains("PPID 16 (DDP segment)"), "{t}");
        let ddp: Vec<&str> = t
            .lines()
            .filter(|l| l.contains("DDP/RDMAP") && !l.contains("ERROR"))
            .collect();
        assert_eq!(ddp.len(), 1, "{t}");
        assert!(
            ddp[0].contains("DDP-SSN 5") && ddp[0].contains("MSN 1") && ddp[0].contains("len 30"),
            "{t}"
        );
        assert!(
            t.contains("DDP-SSN 6 DDP Stream Session Accept private data 3 bytes"),
            "{t}"
        );
        assert!(t.contains("RFC 5043 §10"), "{t}");
        assert_eq!((rep.errors(), rep.warnings()), (1, 1), "{t}");
        // The same as typed records.
        let records: Vec<&SctpRecord> = rep.associations[0]
            .events
            .iter()
            .flat_map(|e| &e.lines)
            .filter_map(|l| match &l.record {
                Record::Sctp(
                    r @ (SctpRecord::DdpSegment { .. } | SctpRecord::DdpControl { .. }),
                ) => Some(r),
                _ => None,
            })
            .collect();
        assert!(
            matches!(
                records[..],
                [
                    SctpRecord::DdpSegment {
                        ddp_ssn: 5,
                        header: rdmap::Header::Send {
                            msn: 1,
                            mo: 0,
                            last: true,
                            ..
                        },
                        payload_len: 30,
                    },
                    SctpRecord::DdpControl {
                        ddp_ssn: 6,
                        function: sctp::ddp_adapt::FunctionCode::Accept,
                        private_data_len: 3,
                        enhanced: None,
                    },
                ]
            ),
            "{records:?}"
        );
        let f = Record::Sctp(records[0].clone()).fields();
        assert_eq!(f.get("ddp_ssn"), Some(&crate::Value::Num(5)));
        assert_eq!(f.get("qn"), Some(&crate::Value::Num(0)));
        assert_eq!(f.get("opcode_name"), Some(&crate::Value::from("Send")));
    }

    /// RFC 9260 §6.9 / §6.6: unordered fragments are joined by TSN run, not by their
    /// (meaningless) SSN: two unordered messages on one stream whose fragments arrive
    /// interleaved (the first one's end after the second's) decode as two messages.
    #[test]
    fn rfc9260_6_9_unordered_fragments_join_by_tsn_run() {
        let send = |ddp_ssn: u8, msn: u32, len: usize| {
            let mut seg = vec![0, ddp_ssn, 0x41, 0x43, 0, 0, 0, 0];
            seg.extend_from_slice(&0u32.to_be_bytes());
            seg.extend_from_slice(&msn.to_be_bytes());
            seg.extend_from_slice(&0u32.to_be_bytes());
            seg.extend(std::iter::repeat_n(ddp_ssn, len));
            seg
        };
        let (m1, m2) = (send(5, 1, 30), send(6, 2, 20));
        let d = |tsn, flags, b| {
            a_to_b(
                u64::from(tsn),
                A1,
                B1,
                &[data(tsn, 0, PPID_DDP_SEGMENT, flags, b)],
            )
        };
        // U = 4, B = 2, E = 1; both messages carry SSN 0.
        let mut f = handshake();
        f.push(d(100, 6, &m1[..10]));
        f.push(d(101, 4, &m1[10..20]));
        f.push(d(103, 6, &m2[..12]));
        f.push(d(104, 5, &m2[12..]));
        f.push(d(102, 5, &m1[20..]));
        let rep = decode(&f);
        let t = text(&rep, &SctpOptions::default());
        let ddp: Vec<&str> = t.lines().filter(|l| l.contains("DDP/RDMAP")).collect();
        assert_eq!(ddp.len(), 2, "{t}");
        assert!(
            ddp[0].contains("DDP-SSN 6") && ddp[0].contains("len 20"),
            "{t}"
        );
        assert!(
            ddp[1].contains("DDP-SSN 5") && ddp[1].contains("len 30"),
            "{t}"
        );
        assert_eq!(rep.errors(), 0, "{t}");
    }

    /// Captures that start mid-association still decode (no handshake: tags taken as seen).
    #[test]
    fn mid_association_capture() {
        let f = [
            a_to_b(1, A1, B1, &[data(7, 0, 0, 3, b"x")]),
            a_to_b(2, A1, B1, &[data(8, 1, 0, 3, b"y")]),
        ];
        let rep = decode(&f);
        assert_eq!(rep.associations.len(), 1);
        assert_eq!(rep.associations[0].state, AssocState::NoSetupSeen);
        assert_eq!(rep.errors(), 0);
    }

    /// Arbitrary bytes as SCTP never panic.
    #[test]
    fn garbage_never_panics() {
        let mut x: u32 = 12345;
        for len in 0..200usize {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let mut b = bytes.clone();
            if b.len() >= 12 {
                sctp::wire::finish_packet(&mut b);
            }
            let rep = decode(&[frame(1, A1, B1, None, &bytes), frame(2, A1, B1, None, &b)]);
            let _ = text(&rep, &SctpOptions::default());
        }
    }
}
