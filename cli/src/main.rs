//! `softrnic`: the command-line front end of the software RNIC.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use softrnic::decode::{self, DecodeOptions};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
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
    }
}
