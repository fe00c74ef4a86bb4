//! pcap capture of link traffic in virtual time.
//!
//! Captures are classic pcap files (Ethernet link type, nanosecond timestamps, little-endian
//! headers whatever the host), so a run's capture is byte-for-byte the same on every machine.

use std::fs::File;
use std::io::{self, BufWriter, Write};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::time::Instant;

/// Bytes kept of each frame.
pub const SNAPLEN: u32 = 262_144;

/// Identifies a capture within one [`Sim`](crate::Sim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CaptureId(pub(crate) usize);

/// Where on a link frames are recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CapturePoint {
    /// As handed to the receiving side, at arrival time: after loss, corruption, duplication
    /// and reordering. This is what a capture at the receiver would show.
    #[default]
    Receive,
    /// As offered by the sending side, at the moment it was offered, before any queueing or
    /// impairment (frames later dropped are included).
    Transmit,
}

pub(crate) enum Sink {
    File(BufWriter<File>),
    Memory(Vec<u8>),
    Writer(Box<dyn Write>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(w) => w.write(buf),
            Sink::Memory(w) => w.write(buf),
            Sink::Writer(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(w) => w.flush(),
            Sink::Memory(w) => w.flush(),
            Sink::Writer(w) => w.flush(),
        }
    }
}

pub(crate) struct Capture {
    pub(crate) link: usize,
    pub(crate) point: CapturePoint,
    writer: Option<PcapWriter<Sink>>,
    error: Option<String>,
}

impl Capture {
    pub(crate) fn new(link: usize, point: CapturePoint, sink: Sink) -> Result<Capture, String> {
        let header = PcapHeader {
            snaplen: SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(sink, header).map_err(|e| e.to_string())?;
        Ok(Capture {
            link,
            point,
            writer: Some(writer),
            error: None,
        })
    }

    pub(crate) fn record(&mut self, at: Instant, frame: &[u8]) {
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        if self.error.is_some() {
            return;
        }
        let kept = frame.get(..SNAPLEN as usize).unwrap_or(frame);
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let packet = PcapPacket::new(at.since_start(), orig_len, kept);
        if let Err(e) = writer.write_packet(&packet) {
            self.error = Some(e.to_string());
        }
    }

    /// Flushes and closes the capture; returns the bytes of a memory capture.
    pub(crate) fn finish(&mut self) -> Result<Vec<u8>, String> {
        if let Some(e) = self.error.take() {
            self.writer = None;
            return Err(e);
        }
        match self.writer.take().map(PcapWriter::into_writer) {
            None => Err("capture already finished".to_string()),
            Some(Sink::Memory(bytes)) => Ok(bytes),
            Some(mut sink) => sink.flush().map(|()| Vec::new()).map_err(|e| e.to_string()),
        }
    }
}
