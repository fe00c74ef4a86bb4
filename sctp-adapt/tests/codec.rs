//! Codec round trips for every chunk, parameter and error cause, and robustness against
//! arbitrary bytes.

use proptest::prelude::*;
use sctp::wire::{
    Chunk, CommonHeader, DataChunk, ErrorCause, GapBlock, InitChunk, Param, SackChunk,
    build_packet, fuzz_roundtrip, parse_packet,
};

/// A chunk with owned storage, so strategies can produce borrowed `Chunk`s.
#[derive(Debug, Clone)]
enum Spec {
    Data(u8, u32, u16, u16, u32, Vec<u8>),
    CookieEcho(Vec<u8>),
    Unknown(u8, u8, Vec<u8>),
    Owned(Chunk<'static>),
}

impl Spec {
    fn chunk(&self) -> Chunk<'_> {
        match self {
            Spec::Data(flags, tsn, stream, ssn, ppid, data) => Chunk::Data(DataChunk {
                flags: *flags,
                tsn: *tsn,
                stream: *stream,
                ssn: *ssn,
                ppid: *ppid,
                data,
            }),
            Spec::CookieEcho(c) => Chunk::CookieEcho(c),
            Spec::Unknown(t, f, v) => Chunk::Unknown {
                chunk_type: *t,
                flags: *f,
                value: v,
            },
            Spec::Owned(c) => c.clone(),
        }
    }
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

const KNOWN_PARAMS: [u16; 9] = [1, 5, 6, 7, 8, 9, 11, 12, 0x8000];

fn param() -> impl Strategy<Value = Param> {
    prop_oneof![
        bytes(40).prop_map(Param::HeartbeatInfo),
        any::<[u8; 4]>().prop_map(|a| Param::Ipv4(a.into())),
        any::<[u8; 16]>().prop_map(|a| Param::Ipv6(a.into())),
        bytes(80).prop_map(Param::StateCookie),
        bytes(20).prop_map(Param::UnrecognizedParam),
        any::<u32>().prop_map(Param::CookiePreservative),
        bytes(20).prop_map(Param::HostNameAddress),
        proptest::collection::vec(any::<u16>(), 0..5).prop_map(Param::SupportedAddressTypes),
        Just(Param::EcnCapable),
        (
            any::<u16>().prop_filter("unknown", |c| !KNOWN_PARAMS.contains(c)),
            bytes(20)
        )
            .prop_map(|(code, value)| Param::Unknown { code, value }),
    ]
}

fn cause() -> impl Strategy<Value = ErrorCause> {
    prop_oneof![
        any::<u16>().prop_map(|stream| ErrorCause::InvalidStreamId { stream }),
        proptest::collection::vec(any::<u16>(), 0..5).prop_map(ErrorCause::MissingMandatoryParam),
        any::<u32>().prop_map(|staleness_us| ErrorCause::StaleCookie { staleness_us }),
        Just(ErrorCause::OutOfResource),
        bytes(20).prop_map(ErrorCause::UnresolvableAddress),
        bytes(20).prop_map(ErrorCause::UnrecognizedChunk),
        Just(ErrorCause::InvalidMandatoryParam),
        bytes(20).prop_map(ErrorCause::UnrecognizedParams),
        any::<u32>().prop_map(|tsn| ErrorCause::NoUserData { tsn }),
        Just(ErrorCause::CookieWhileShuttingDown),
        bytes(20).prop_map(ErrorCause::RestartWithNewAddresses),
        bytes(20).prop_map(ErrorCause::UserInitiatedAbort),
        bytes(20).prop_map(ErrorCause::ProtocolViolation),
        (
            any::<u16>().prop_filter("unknown", |c| !(1..=13).contains(c)),
            bytes(20)
        )
            .prop_map(|(code, info)| ErrorCause::Unknown { code, info }),
    ]
}

fn init() -> impl Strategy<Value = InitChunk> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        proptest::collection::vec(param(), 0..6),
    )
        .prop_map(|(t, w, os, mis, tsn, params)| InitChunk {
            initiate_tag: t,
            a_rwnd: w,
            outbound_streams: os,
            inbound_streams: mis,
            initial_tsn: tsn,
            params,
        })
}

const KNOWN_CHUNKS: [u8; 13] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14];

fn chunk() -> impl Strategy<Value = Spec> {
    let owned = prop_oneof![
        init().prop_map(Chunk::Init),
        init().prop_map(Chunk::InitAck),
        (
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec(any::<(u16, u16)>(), 0..6),
            proptest::collection::vec(any::<u32>(), 0..6)
        )
            .prop_map(|(f, c, w, g, d)| Chunk::Sack(SackChunk {
                flags: f,
                cum_tsn_ack: c,
                a_rwnd: w,
                gaps: g
                    .into_iter()
                    .map(|(start, end)| GapBlock { start, end })
                    .collect(),
                dup_tsns: d,
            })),
        bytes(60).prop_map(Chunk::Heartbeat),
        bytes(60).prop_map(Chunk::HeartbeatAck),
        (any::<bool>(), proptest::collection::vec(cause(), 0..4))
            .prop_map(|(t_bit, causes)| Chunk::Abort { t_bit, causes }),
        any::<u32>().prop_map(|cum_tsn_ack| Chunk::Shutdown { cum_tsn_ack }),
        Just(Chunk::ShutdownAck),
        proptest::collection::vec(cause(), 0..4).prop_map(Chunk::Error),
        Just(Chunk::CookieAck),
        any::<bool>().prop_map(|t_bit| Chunk::ShutdownComplete { t_bit }),
    ];
    prop_oneof![
        (
            any::<u8>(),
            any::<u32>(),
            any::<u16>(),
            any::<u16>(),
            any::<u32>(),
            bytes(300)
        )
            .prop_map(|(f, t, s, n, p, d)| Spec::Data(f, t, s, n, p, d)),
        bytes(200).prop_map(Spec::CookieEcho),
        (
            any::<u8>().prop_filter("unknown", |t| !KNOWN_CHUNKS.contains(t)),
            any::<u8>(),
            bytes(40)
        )
            .prop_map(|(t, f, v)| Spec::Unknown(t, f, v)),
        owned.prop_map(Spec::Owned),
    ]
}

proptest! {
    /// RFC 9260 §3: every chunk type, with every parameter and error cause, survives emit
    /// and parse unchanged, bundled with others into one packet with a valid CRC32c.
    #[test]
    fn rfc9260_3_chunk_roundtrip(
        ports in any::<(u16, u16)>(),
        vtag in any::<u32>(),
        specs in proptest::collection::vec(chunk(), 0..6),
    ) {
        let header = CommonHeader { src_port: ports.0, dst_port: ports.1, verification_tag: vtag };
        let chunks: Vec<Chunk<'_>> = specs.iter().map(Spec::chunk).collect();
        let bytes = build_packet(&header, &chunks);
        prop_assert_eq!(bytes.len() % 4, 0);
        let parsed = parse_packet(&bytes, true).unwrap();
        prop_assert_eq!(parsed.header, header);
        prop_assert_eq!(parsed.chunks, chunks.clone());
        for c in &chunks {
            let mut v = Vec::new();
            c.emit(&mut v);
            prop_assert_eq!(c.buffer_len(), v.len());
        }
    }

    /// Arbitrary bytes never panic the parser, and whatever parses survives a round trip.
    #[test]
    fn arbitrary_bytes_never_panic(data in bytes(400)) {
        let _ = parse_packet(&data, true);
        let _ = fuzz_roundtrip(&data);
    }

    /// An established association fed arbitrary packets (with valid ports, tag and CRC)
    /// never panics.
    #[test]
    fn association_survives_arbitrary_packets(data in bytes(600)) {
        sctp::fuzz::association(&data);
    }

    /// An established association fed mutated well-formed packets never panics.
    #[test]
    fn association_survives_mutated_packets(
        specs in proptest::collection::vec(chunk(), 1..4),
        flips in proptest::collection::vec(any::<(u16, u8)>(), 0..3),
        ctl in any::<u8>(),
    ) {
        let chunks: Vec<Chunk<'_>> = specs.iter().map(Spec::chunk).collect();
        let mut pkt = build_packet(&CommonHeader::default(), &chunks);
        for (at, x) in flips {
            let n = pkt.len();
            if n > 12 {
                pkt[12 + usize::from(at) % (n - 12)] ^= x;
            }
        }
        let mut input = (pkt.len() as u16).to_be_bytes().to_vec();
        input.push(ctl);
        input.extend_from_slice(&pkt);
        input.extend_from_slice(&input.clone());
        sctp::fuzz::association(&input);
    }

    /// Valid packets with bytes flipped or cut never panic and never loop.
    #[test]
    fn mutated_packets_never_panic(
        specs in proptest::collection::vec(chunk(), 1..4),
        flips in proptest::collection::vec(any::<(u16, u8)>(), 0..6),
        cut in any::<u16>(),
    ) {
        let chunks: Vec<Chunk<'_>> = specs.iter().map(Spec::chunk).collect();
        let mut bytes = build_packet(&CommonHeader::default(), &chunks);
        for (at, x) in flips {
            let n = bytes.len();
            bytes[usize::from(at) % n] ^= x;
        }
        bytes.truncate(usize::from(cut) % (bytes.len() + 1));
        let _ = fuzz_roundtrip(&bytes);
    }
}

/// RFC 9260 §3.2: the chunk length counts the padding of inner parameters but not that of
/// the last parameter; the chunk itself is padded to 4 bytes.
#[test]
fn rfc9260_3_2_chunk_length_excludes_last_parameter_padding() {
    let init = Chunk::Init(InitChunk {
        initiate_tag: 1,
        a_rwnd: 2,
        outbound_streams: 3,
        inbound_streams: 4,
        initial_tsn: 5,
        params: vec![
            Param::StateCookie(vec![1]),
            Param::StateCookie(vec![1, 2, 3, 4, 5]),
        ],
    });
    let mut v = Vec::new();
    init.emit(&mut v);
    // 20 fixed + (5 + 3 padding) + 9, padded to 40.
    assert_eq!(u16::from_be_bytes([v[2], v[3]]), 20 + 8 + 9);
    assert_eq!(v.len(), 40);
}

/// RFC 9260 §3.3.1: DATA header layout: type 0, flags U/B/E, length 16 + data, TSN, stream,
/// SSN, PPID, then user data.
#[test]
fn rfc9260_3_3_1_data_layout() {
    let d = Chunk::Data(DataChunk {
        flags: 0x07,
        tsn: 0x0102_0304,
        stream: 0x0506,
        ssn: 0x0708,
        ppid: 0x090a_0b0c,
        data: b"xyz",
    });
    let mut v = Vec::new();
    d.emit(&mut v);
    assert_eq!(
        v,
        [
            0, 7, 0, 19, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, b'x', b'y', b'z', 0
        ]
    );
}
