//! `softrnic`: the command-line front end of the software RNIC.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use softrnic::decode::{self, DecodeOptions};
use softrnic::perf::Test;

#[derive(Parser)]
#[command(
    name = "softrnic",
    version,
    about = "softrnic: a software iWARP RNIC (RDMAP/DDP/MPA over TCP)",
    long_about = None
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Decode the iWARP traffic (MPA, DDP, RDMAP) in pcap/pcapng captures.
    ///
    /// Every TCP connection is reassembled in both directions; connections that begin with an
    /// MPA Request are decoded: the MPA setup (revision, M/C/R/H flags, RFC 6581 IRD/ORD,
    /// peer-to-peer flag and RTR type), the negotiated session, and every FPDU (markers
    /// stripped, CRC32c checked when negotiated) with its DDP and RDMAP headers. A summary per
    /// connection follows, with per-opcode counts.
    ///
    /// Exit status: 0 when everything decoded cleanly, 1 when a CRC error or a malformed frame
    /// was found, 2 when a file could not be read.
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
        /// Decode only the connection with this number (as numbered in the output).
        #[arg(long, value_name = "N")]
        conn: Option<usize>,
    },
    /// Run RDMA Writes, Reads and Sends between two simulated RNICs over an impaired link.
    ///
    /// Two softrnic engines run over simulated TCP in virtual time, deterministically per
    /// seed. Every byte is checked at its target: verified, lost (never arrived) or misplaced
    /// (arrived wrong). Scenarios: clean, loss (1 % loss, reordering, duplication), corrupt
    /// (payload bit flips that only MPA's CRC can catch), corrupt-tcp (bit flips the TCP/IP
    /// checksums catch), linkflap (link down 3 s mid-transfer), gilbert (bursty loss), all.
    ///
    /// Exit status: 0 when every byte was verified, 1 when anything was lost or misplaced or
    /// a run did not finish, 2 on bad arguments or I/O errors.
    Sim(Box<softrnic::sim::SimArgs>),
    /// Run two RNICs in this process over loopback TCP and exercise every operation.
    ///
    /// No setup or privileges needed: connects two software RNICs through 127.0.0.1 (an
    /// ephemeral port) with full MPA setup, registers memory and runs Send/Receive, RDMA
    /// Write, RDMA Read, atomic Fetch and Add and Compare and Swap, and Send with Invalidate
    /// followed by a Write to the invalidated STag (which must be refused with a Terminate).
    /// Every byte is verified; a table of what ran and how fast follows.
    ///
    /// Exit status: 0 when everything verified, 1 otherwise.
    Demo,
    /// RDMA Write bandwidth (perftest's ib_write_bw): server without an address, client with.
    WriteBw(softrnic::perf::PerfArgs),
    /// RDMA Write latency, ping-pong (perftest's ib_write_lat).
    WriteLat(softrnic::perf::PerfArgs),
    /// RDMA Read bandwidth (perftest's ib_read_bw).
    ReadBw(softrnic::perf::PerfArgs),
    /// RDMA Read latency (perftest's ib_read_lat).
    ReadLat(softrnic::perf::PerfArgs),
    /// Send bandwidth (perftest's ib_send_bw).
    SendBw(softrnic::perf::PerfArgs),
    /// Send latency, ping-pong (perftest's ib_send_lat).
    SendLat(softrnic::perf::PerfArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => {
            ExitCode::from(softrnic::sim::run_command(&args, &mut std::io::stdout()))
        }
        Command::Decode {
            files,
            summary,
            counts,
            hex,
            conn,
        } => {
            let opts = DecodeOptions {
                frames: !summary && !counts,
                summary: !counts,
                counts,
                hex,
                conn,
            };
            let mut status = 0u8;
            let stdout = std::io::stdout();
            for file in &files {
                match decode::decode_file(file, &opts, &mut stdout.lock()) {
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
        Command::Demo => softrnic::demo::run_command(&mut std::io::stdout()),
        Command::WriteBw(a) => perf(Test::WriteBw, &a),
        Command::WriteLat(a) => perf(Test::WriteLat, &a),
        Command::ReadBw(a) => perf(Test::ReadBw, &a),
        Command::ReadLat(a) => perf(Test::ReadLat, &a),
        Command::SendBw(a) => perf(Test::SendBw, &a),
        Command::SendLat(a) => perf(Test::SendLat, &a),
    }
}

fn perf(test: softrnic::perf::Test, args: &softrnic::perf::PerfArgs) -> ExitCode {
    softrnic::perf::run_command(test, args, &mut std::io::stdout())
}
