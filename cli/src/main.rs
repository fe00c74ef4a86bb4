//! `softrnic`: the command-line front end of the software RNIC.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use softrnic_cli::decode::{self, DecodeOptions};
use softrnic_cli::perf::Test;

#[derive(Parser)]
#[command(
    name = "softrnic",
    version,
    about = "softrnic: a software iWARP RNIC (RDMAP/DDP over MPA/TCP and over SCTP). Logs: RUST_LOG=info|debug|trace (stderr)",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode the iWARP traffic (MPA, DDP, RDMAP) and SCTP in pcap/pcapng captures.
    ///
    /// Every TCP connection is reassembled in both directions; connections that begin with an
    /// MPA Request are decoded: the MPA setup (revision, M/C/R/H flags, RFC 6581 IRD/ORD,
    /// peer-to-peer flag and RTR type), the negotiated session, and every FPDU (markers
    /// stripped, CRC32c checked when negotiated) with its DDP and RDMAP headers. A summary per
    /// connection follows, with per-opcode counts.
    ///
    /// SCTP packets, over IP (protocol 132) or UDP-encapsulated (RFC 6951, port 9899 or those
    /// given with --sctp-udp-port), are grouped into associations by ports and verification
    /// tags: every chunk is shown (DATA TSN/stream/SSN/PPID, SACK gaps and duplicates, INIT
    /// parameters and addresses, ABORT/ERROR causes, ...), the CRC32c is checked, and DDP
    /// segments (PPID 16, RFC 5043) are decoded as DDP/RDMAP. The SCTP summary gives both
    /// directions' TSN ranges, DATA chunks and bytes, retransmissions and the paths (address
    /// pairs) used; --counts adds one `sctp 0xNN CHUNK count` line per chunk type.
    ///
    /// --json prints JSON Lines instead of text: one object per decoded record ("type":
    /// "record": frame, timestamp in seconds, direction, connection or association, stream
    /// offset, layer tcp/mpa/ddp/rdmap/sctp, verdict info/warning/error, the text line, and
    /// the decoded fields such as MPA IRD/ORD, CRC status, DDP STag/TO/QN/MSN/MO, RDMAP opcode,
    /// Read Request sizes, Terminate layer/type/code, SCTP TSN/stream/SSN/PPID), then one
    /// summary object per capture ("type": "summary": connections, FPDUs, CRC good/bad,
    /// errors, warnings, per-opcode and per-chunk-type counts).
    ///
    /// Exit status: 0 when everything decoded cleanly, 1 when a CRC error or a malformed frame
    /// or packet was found, 2 when a file could not be read.
    Decode {
        /// Capture files (pcap or pcapng; Ethernet, Linux cooked or raw IP link type).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Print only the per-connection summaries, not every frame.
        #[arg(long)]
        summary: bool,
        /// Print only per-opcode totals, one "0xNN name count" line each (for scripts).
        #[arg(long, conflicts_with_all = ["summary", "hex"])]
        counts: bool,
        /// Also dump every ULPDU (DDP segment) in hex.
        #[arg(long)]
        hex: bool,
        /// Print JSON Lines: one object per decoded record (frame, timestamp, direction,
        /// connection, offset, layer, verdict, text, fields), then a summary object.
        #[arg(long, conflicts_with_all = ["summary", "counts", "hex"])]
        json: bool,
        /// Decode only the connection with this number (as numbered in the output).
        #[arg(long, value_name = "N")]
        conn: Option<usize>,
        /// Decode only the SCTP association with this number (as numbered in the output).
        #[arg(long, value_name = "N")]
        assoc: Option<usize>,
        /// UDP ports that carry SCTP (RFC 6951 encapsulation), comma-separated or repeated;
        /// a datagram to or from any of them is decoded as SCTP.
        #[arg(
            long,
            value_name = "PORT",
            value_delimiter = ',',
            default_value = "9899"
        )]
        sctp_udp_port: Vec<u16>,
    },
    /// Run RDMA Writes, Reads and Sends between two simulated RNICs over an impaired link.
    ///
    /// Two softrnic engines run over simulated TCP in virtual time, deterministically per
    /// seed. Every byte is checked at its target: verified, lost (never arrived) or misplaced
    /// (arrived wrong). Scenarios: clean, loss (1 % loss, reordering, duplication), corrupt
    /// (payload bit flips that only MPA's CRC can catch), corrupt-tcp (bit flips the TCP/IP
    /// checksums catch), linkflap (link down 3 s mid-transfer), gilbert (bursty loss), all.
    ///
    /// Experiments over multipath SCTP (RDMA Writes through the RNIC's QP engine, tables and
    /// PNG figures with --out): failover (two paths failing in turn over 120 s; multihoming,
    /// CMT and CMT-PF, throughput per second), bandwidth (message sizes 64 B to 4 MiB over
    /// one and two paths) and onesided (MPI-style Put and Get latency, 2 B to 4 MiB, over
    /// TCP and over SCTP with one and two paths).
    ///
    /// Exit status: 0 when every byte was verified, 1 when anything was lost or misplaced or
    /// a run did not finish, 2 on bad arguments or I/O errors.
    Sim(Box<softrnic_cli::sim::SimArgs>),
    /// Run two RNICs in this process over loopback and exercise every operation.
    ///
    /// No setup or privileges needed: connects two software RNICs through 127.0.0.1 —
    /// MPA over kernel TCP by default (ephemeral port, full MPA setup), or DDP over
    /// softrnic's own SCTP with `--transport sctp` (RFC 5043 over RFC 6951 UDP
    /// encapsulation) — registers memory and runs Send/Receive, RDMA Write, RDMA Read,
    /// atomic Fetch and Add and Compare and Swap, and Send with Invalidate followed by a
    /// Write to the invalidated STag (which must be refused with a Terminate). Every byte is
    /// verified; a table of what ran and how fast follows.
    ///
    /// Exit status: 0 when everything verified, 1 otherwise.
    Demo(softrnic_cli::demo::DemoArgs),
    /// RDMA Write bandwidth, interoperating with perftest's `ib_write_bw -R`.
    ///
    /// Server without an address, client with one; give both ends the same test options,
    /// as with perftest. The perftest-style tools speak perftest's rdma_cm (-R)
    /// protocol: a control connection carrying the parameter and result exchanges as
    /// Sends, then the test connection, both to the same port; either end may be perftest.
    /// perftest options without a meaning over iWARP are accepted and ignored (each says so
    /// below); any other perftest option these tools do not implement (-q, -S, --use-srq,
    /// --cpu_util, ...) is refused by name with exit status 2.
    WriteBw(softrnic_cli::perf::PerfArgs),
    /// RDMA Write latency, ping-pong (perftest's `ib_write_lat -R`).
    WriteLat(softrnic_cli::perf::PerfArgs),
    /// RDMA Read bandwidth (perftest's `ib_read_bw -R`).
    ReadBw(softrnic_cli::perf::PerfArgs),
    /// RDMA Read latency (perftest's `ib_read_lat -R`).
    ReadLat(softrnic_cli::perf::PerfArgs),
    /// Send bandwidth (perftest's `ib_send_bw -R`).
    SendBw(softrnic_cli::perf::PerfArgs),
    /// Send latency, ping-pong (perftest's `ib_send_lat -R`).
    SendLat(softrnic_cli::perf::PerfArgs),
    /// Atomic bandwidth: RFC 7306 Fetch and Add or Compare and Swap (perftest's
    /// `ib_atomic_bw -R`).
    ///
    /// As read-bw, with 8-octet atomics instead of Reads: -A FETCH_AND_ADD (default, adds 1)
    /// or CMP_AND_SWAP (compare 0, swap 0); the size is 8 (-s 8 only, no -a); -o sets the
    /// outstanding atomics (IRD/ORD). Each request targets the next cache line of the
    /// server's cycle buffer, as perftest; the server's buffer grants remote atomic access
    /// only (an RDMA Read or Write of it is refused). The target side prints the sum of the
    /// words its peer's atomics hit (the Fetch and Adds executed, or 0 after Compare and
    /// Swaps).
    AtomicBw(softrnic_cli::perf::PerfArgs),
    /// Atomic latency (perftest's `ib_atomic_lat -R`): read-lat's exchanges with one 8-octet
    /// atomic at a time (-A as atomic-bw), all on the server's first word.
    AtomicLat(softrnic_cli::perf::PerfArgs),
    /// rdma_cm ping-pong, wire-compatible with librdmacm's rping (-s server, -c client).
    ///
    /// The client advertises its start buffer, the server RDMA-Reads it, the client
    /// advertises its rdma buffer, the server RDMA-Writes the data back; -V compares. Works
    /// against Linux rping (siw, hardware RNICs) in both roles. --inject bad-stag|out-of-bounds
    /// makes one advertisement (client) or one RDMA operation (server) invalid to check the
    /// Terminate the RFCs prescribe.
    ///
    /// Exit status: 0 success, 1 failure, 2 bad arguments, 3 the injected error drew the
    /// expected Terminate from the peer, 4 we sent the expected Terminate for the peer's
    /// invalid access and our memory is untouched, 5 the peer's Terminate names the expected
    /// error with Layer and Error Type exchanged (Linux siw 6.1 on x86 does this).
    Rping(Box<softrnic_cli::rping::RpingArgs>),
    /// Conformance test of an iWARP peer: a catalogue of RFC 5044/6581/5041/5040 cases.
    ///
    /// The runner connects to the peer (a listening server, e.g. `rping -s -P` on Linux siw
    /// or `softrnic rping -s -P`) once per case, as a raw MPA/DDP/RDMAP endpoint that sends
    /// well-formed and deliberately malformed frames, and judges what the peer does: PASS,
    /// FAIL, DEVIATION (a known, documented deviation) or N/A (a declined feature). Prints a
    /// table (case, RFC clause, what was sent, what the RFC requires, what the peer did) and
    /// a summary line; --json and --junit write machine-readable reports, --pcap the capture
    /// of the run (default softrnic-conform.pcap; `softrnic decode` reads it).
    ///
    /// Exit status: 0 no case failed, 1 a case failed (or deviated, with --strict), 2 bad
    /// arguments, no connection at all, or unwritable files.
    Conform(Box<softrnic_cli::conform::ConformArgs>),
    /// SCTP throughput, iperf-like (-s server, -c client), raw IPv4 or --udp-encap (RFC 6951).
    ///
    /// Multihoming: -B lists local addresses, -c the server's; path events (UP, DOWN,
    /// POTENTIALLY-FAILED, primary changes) are printed as they happen, per-path statistics
    /// at the end. --verify checks every byte, per-stream order and completeness.
    ///
    /// Exit status: 0 success, 1 verification failure, loss or abort, 2 usage error.
    SctpPerf(Box<softrnic_cli::sctp_perf::SctpPerfArgs>),
}

/// Diagnostics go to stderr through `tracing`, filtered by `RUST_LOG` (e.g.
/// `RUST_LOG=debug`, `RUST_LOG=stack=debug,sctp=info`); without it only errors show. Tools
/// print their results on stdout.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(true)
        .try_init();
}

fn main() -> ExitCode {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if let Some(msg) = perftest_refusal(&e) {
                eprintln!("softrnic: {msg}");
                return ExitCode::from(2);
            }
            e.exit()
        }
    };
    match cli.command {
        Command::SctpPerf(args) => softrnic_cli::sctp_perf::run(&args),
        Command::Sim(args) => ExitCode::from(softrnic_cli::sim::run_command(
            &args,
            &mut std::io::stdout(),
        )),
        Command::Decode {
            files,
            summary,
            counts,
            hex,
            json,
            conn,
            assoc,
            sctp_udp_port,
        } => {
            let sctp_opts = decode::SctpOptions {
                udp_ports: sctp_udp_port,
                assoc,
            };
            let opts = DecodeOptions {
                frames: !summary && !counts,
                summary: !counts,
                counts,
                hex,
                conn,
                json,
            };
            let mut status = 0u8;
            let stdout = std::io::stdout();
            for file in &files {
                match decode::decode_file_with(file, &opts, &sctp_opts, &mut stdout.lock()) {
                    Ok(report) => {
                        if report.has_errors() {
                            status = status.max(1);
                        }
                    }
                    Err(e) => {
                        eprintln!("softrnic decode: {e}");
                        status = 2;
                    }
                }
            }
            ExitCode::from(status)
        }
        Command::Demo(a) => softrnic_cli::demo::run_command(&a, &mut std::io::stdout()),
        Command::WriteBw(a) => perf(Test::WriteBw, &a),
        Command::WriteLat(a) => perf(Test::WriteLat, &a),
        Command::ReadBw(a) => perf(Test::ReadBw, &a),
        Command::ReadLat(a) => perf(Test::ReadLat, &a),
        Command::SendBw(a) => perf(Test::SendBw, &a),
        Command::SendLat(a) => perf(Test::SendLat, &a),
        Command::AtomicBw(a) => perf(Test::AtomicBw, &a),
        Command::AtomicLat(a) => perf(Test::AtomicLat, &a),
        Command::Rping(a) => softrnic_cli::rping::run_command(&a, &mut std::io::stdout()),
        Command::Conform(a) => softrnic_cli::conform::run_command(&a, &mut std::io::stdout()),
    }
}

/// For a perftest-style tool, a clear refusal of a perftest option it does not implement
/// (clap would call it an unexpected argument).
fn perftest_refusal(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let tool = std::env::args().nth(1)?;
    if !Test::ALL.iter().any(|t| t.name() == tool) {
        return None;
    }
    let arg = e.get(ContextKind::InvalidArg)?.to_string();
    softrnic_cli::perf::refusal(&arg).map(|m| format!("{tool}: {m}"))
}

fn perf(test: softrnic_cli::perf::Test, args: &softrnic_cli::perf::PerfArgs) -> ExitCode {
    softrnic_cli::perf::run_command(test, args, &mut std::io::stdout())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The perftest-style tool a command runs (no wildcard: a new command must say).
    fn tool_of(c: &Command) -> Option<Test> {
        match c {
            Command::WriteBw(_) => Some(Test::WriteBw),
            Command::WriteLat(_) => Some(Test::WriteLat),
            Command::ReadBw(_) => Some(Test::ReadBw),
            Command::ReadLat(_) => Some(Test::ReadLat),
            Command::SendBw(_) => Some(Test::SendBw),
            Command::SendLat(_) => Some(Test::SendLat),
            Command::AtomicBw(_) => Some(Test::AtomicBw),
            Command::AtomicLat(_) => Some(Test::AtomicLat),
            Command::Decode { .. }
            | Command::Sim(_)
            | Command::Demo(_)
            | Command::Rping(_)
            | Command::Conform(_)
            | Command::SctpPerf(_) => None,
        }
    }

    /// `Test::ALL` (the tools whose unimplemented perftest options are refused by name) is
    /// exactly the set of subcommands running a perftest-style tool, each under its name.
    #[test]
    fn test_all_lists_every_perftest_tool_under_its_subcommand() {
        for t in Test::ALL {
            let cli = Cli::try_parse_from(["softrnic", t.name()])
                .unwrap_or_else(|e| panic!("{}: {e}", t.name()));
            assert_eq!(tool_of(&cli.command), Some(t), "{}", t.name());
        }
        let mut tools = 0;
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            let Ok(cli) = Cli::try_parse_from(["softrnic", name]) else {
                continue;
            };
            if let Some(t) = tool_of(&cli.command) {
                assert!(Test::ALL.contains(&t), "{name} is missing from Test::ALL");
                assert_eq!(t.name(), name);
                tools += 1;
            }
        }
        assert_eq!(tools, Test::ALL.len());
    }
}
