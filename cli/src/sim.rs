//! The `softrnic sim` command: arguments, the plan of runs (scenario × seed × overrides), the
//! table it prints. The runs themselves are [`harness::mpa`] (MPA over TCP, one link) and
//! [`harness::sctp`] (DDP over multihomed SCTP).

use std::path::{Path, PathBuf};
use std::time::Duration;

use harness::mpa::{Capture, RoundShape, RunReport, SCENARIOS, Scenario, UnknownScenario};
use netsim::LinkParams;
use thiserror::Error;

// ---------------------------------------------------------------------------------------------
// The `softrnic sim` command
// ---------------------------------------------------------------------------------------------

/// Arguments of `softrnic sim`.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct SimArgs {
    /// Scenario: clean, loss, corrupt, corrupt-tcp, linkflap, gilbert, or all (MPA over
    /// smoltcp TCP, one link); sctp-clean, sctp-loss, sctp-failover, sctp-flap, their
    /// Concurrent Multipath Transfer variants sctp-cmt-loss, sctp-cmt-failover,
    /// sctp-cmt-flap, or sctp-all (DDP over multihomed SCTP, RFC 5043, two paths). Experiments (RDMA Writes over DDP
    /// over SCTP through the RNIC's QP engine, printing tables and drawing PNG figures with
    /// --out): failover (two paths failing in turn over 120 s, with multihoming, CMT and
    /// CMT-PF: throughput per second), bandwidth (one vs two paths, message sizes 64 B to
    /// 4 MiB) and onesided (MPI-style Put and Get latency, 2 B to 4 MiB, over TCP and over
    /// SCTP with one and two paths).
    #[arg(default_value = "loss")]
    pub scenario: String,
    /// Seed of the run (the first seed of a sweep).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Sweep: run N seeds, from --seed on.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
    /// i.i.d. frame loss in percent per direction, e.g. `1` or `0.5%`; a range `A..B` is
    /// spread evenly over the seeds of a sweep.
    #[arg(long, value_name = "PCT[..PCT]")]
    pub loss: Option<String>,
    /// One-way propagation delay, e.g. `100us`, `2ms`.
    #[arg(long, value_name = "TIME")]
    pub delay: Option<String>,
    /// Reordering probability in percent; a reordered frame is held back by 300 us (or the
    /// scenario's reordering delay).
    #[arg(long, value_name = "PCT")]
    pub reorder: Option<String>,
    /// Duplication probability in percent.
    #[arg(long, value_name = "PCT")]
    pub duplicate: Option<String>,
    /// Corruption probability in percent (keeps the scenario's kind of corruption).
    #[arg(long, value_name = "PCT")]
    pub corrupt: Option<String>,
    /// Link bandwidth in bit/s, e.g. `1G`, `100M`, `10G`.
    #[arg(long, value_name = "RATE")]
    pub bandwidth: Option<String>,
    /// Bytes to move per run, e.g. `4M` (K, M, G are binary multiples), `100MiB`, `1GB`.
    #[arg(long, value_name = "SIZE")]
    pub bytes: Option<String>,
    /// Operation mix of a round: `mixed` (512 KiB Write, 4 × 64 KiB Sends, 256 KiB Read),
    /// `write`, `send` or `read` (1 MiB of that operation; a 1-byte Read closes each round).
    #[arg(long, value_name = "MIX")]
    pub mix: Option<String>,
    /// Write a pcap of the link (with several runs, `-SCENARIO-SEED` is added to the name).
    #[arg(long, value_name = "FILE.pcap")]
    pub capture: Option<PathBuf>,
    /// Print every Terminate and failed MPA setup (experiments: the path events).
    #[arg(long, short)]
    pub verbose: bool,
    /// Experiments: write the figures (failover.png, bandwidth.png, onesided-*.png) into
    /// this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Experiments: multiply the link rates by F. At 1 the failover paths run at 1 Gbit/s
    /// (primary) and 500 Mbit/s (secondary), the bandwidth and onesided links at 1 Gbit/s
    /// each.
    #[arg(long, value_name = "F", default_value_t = DEFAULT_SCALE)]
    pub scale: f64,
    /// Experiments: frames each link direction holds waiting for the transmitter.
    #[arg(long, value_name = "FRAMES", default_value_t = 100)]
    pub queue: usize,
    /// Failover experiment: RTO.Max of the associations (RFC 9260 §6.3.1 C7), the bound on
    /// the backed-off interval between heartbeats to a Potentially Failed path, e.g. `60s`
    /// (RFC 9260 §16's suggestion); 8 s by default. At least RTO.Min (1 s).
    #[arg(long, value_name = "TIME")]
    pub rto_max: Option<String>,
}

/// The experiments' default rate scale (see [`SimArgs::scale`]).
pub const DEFAULT_SCALE: f64 = 0.1;

impl Default for SimArgs {
    /// The command-line defaults: scenario `loss`, seed 1, nothing overridden.
    fn default() -> Self {
        SimArgs {
            scenario: "loss".to_string(),
            seed: 1,
            seeds: None,
            loss: None,
            delay: None,
            reorder: None,
            duplicate: None,
            corrupt: None,
            bandwidth: None,
            bytes: None,
            mix: None,
            capture: None,
            verbose: false,
            out: None,
            scale: DEFAULT_SCALE,
            queue: 100,
            rto_max: None,
        }
    }
}

/// A command-line value that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("--{option}: cannot understand `{value}`: {hint}")]
pub struct ArgError {
    /// The option.
    pub option: &'static str,
    /// The value given.
    pub value: String,
    /// What is expected.
    pub hint: &'static str,
}

fn arg_err(option: &'static str, value: &str, hint: &'static str) -> ArgError {
    ArgError {
        option,
        value: value.to_string(),
        hint,
    }
}

/// Parses a percentage (`1`, `0.5%`) into a probability.
pub fn parse_percent(option: &'static str, s: &str) -> Result<f64, ArgError> {
    let hint = "expected a percentage between 0 and 100, e.g. 1 or 0.5%";
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| arg_err(option, s, hint))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(arg_err(option, s, hint));
    }
    Ok(v / 100.0)
}

/// Parses `A` or `A..B` percentages.
pub fn parse_percent_range(option: &'static str, s: &str) -> Result<(f64, f64), ArgError> {
    match s.split_once("..") {
        Some((a, b)) => Ok((parse_percent(option, a)?, parse_percent(option, b)?)),
        None => {
            let v = parse_percent(option, s)?;
            Ok((v, v))
        }
    }
}

/// Parses a duration such as `100us`, `1.5ms`, `2s` or `500ns`.
pub fn parse_duration(option: &'static str, s: &str) -> Result<Duration, ArgError> {
    let hint = "expected a time such as 100us, 2ms or 1s";
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| arg_err(option, s, hint))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(arg_err(option, s, hint)),
    };
    Duration::try_from_secs_f64(v * scale).map_err(|_| arg_err(option, s, hint))
}

fn parse_scaled(s: &str, units: &[(&str, f64)]) -> Option<f64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    let unit = unit.trim();
    let m = units.iter().find(|(u, _)| *u == unit)?.1;
    let r = v * m;
    (0.0..1.8e19).contains(&r).then_some(r)
}

/// Parses a byte count: plain, `K`/`M`/`G` (either case) or `KiB`/`MiB`/`GiB` (binary),
/// `KB`/`MB`/`GB` (decimal). The one size parser of the tools (`sim --bytes`, `sctp-perf -n`).
pub fn parse_bytes(option: &'static str, s: &str) -> Result<u64, ArgError> {
    const K: f64 = 1024.0;
    let units = [
        ("", 1.0),
        ("B", 1.0),
        ("K", K),
        ("k", K),
        ("KiB", K),
        ("M", K * K),
        ("m", K * K),
        ("MiB", K * K),
        ("G", K * K * K),
        ("g", K * K * K),
        ("GiB", K * K * K),
        ("KB", 1e3),
        ("MB", 1e6),
        ("GB", 1e9),
    ];
    parse_scaled(s, &units)
        .map(|v| v as u64)
        .filter(|&v| v > 0)
        .ok_or_else(|| {
            arg_err(
                option,
                s,
                "expected a size of at least 1 byte, such as 4M, 100MiB or 1GB",
            )
        })
}

/// Parses a bit rate: plain bit/s or with `k`/`K`, `M`, `G` (decimal).
pub fn parse_rate(option: &'static str, s: &str) -> Result<u64, ArgError> {
    let units = [("", 1.0), ("k", 1e3), ("K", 1e3), ("M", 1e6), ("G", 1e9)];
    let t = s.trim().trim_end_matches("bit/s").trim_end_matches("bps");
    parse_scaled(t, &units)
        .map(|v| v as u64)
        .filter(|&v| v > 0)
        .ok_or_else(|| arg_err(option, s, "expected a bit rate such as 1G or 100M"))
}

/// Parses an operation mix (see [`SimArgs::mix`]).
pub fn parse_mix(s: &str) -> Result<RoundShape, ArgError> {
    const MIB: u32 = 1024 * 1024;
    let only = |write, send, sends, read| RoundShape {
        write,
        send,
        sends,
        read,
    };
    match s {
        "mixed" => Ok(RoundShape::default()),
        "write" => Ok(only(MIB, 0, 0, 1)),
        "send" => Ok(only(0, MIB / 4, 4, 1)),
        "read" => Ok(only(0, 0, 0, MIB)),
        _ => Err(arg_err("mix", s, "expected mixed, write, send or read")),
    }
}

/// One run of a plan: the scenario (with overrides applied) and its seed.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRun {
    /// The scenario.
    pub scenario: Scenario,
    /// The seed.
    pub seed: u64,
}

/// Errors of `softrnic sim` before anything runs.
#[derive(Debug, Error)]
pub enum SimCmdError {
    /// A scenario name.
    #[error(transparent)]
    Scenario(#[from] UnknownScenario),
    /// An option value.
    #[error(transparent)]
    Arg(#[from] ArgError),
}

/// The runs of a `softrnic sim` command: the scenarios with every override applied, and the
/// seeds. Runs are produced one at a time ([`Plan::runs`]), so a sweep of any number of seeds
/// takes no more memory than one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    bases: Vec<Scenario>,
    count: u64,
    first_seed: u64,
    overrides: Overrides,
}

impl Plan {
    /// How many runs (scenarios × seeds, saturating).
    pub fn len(&self) -> u64 {
        (self.bases.len() as u64).saturating_mul(self.count)
    }

    /// Whether there is no run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The runs, in order: every seed of the first scenario, then of the next. With a loss
    /// range, the loss is spread evenly over the seeds.
    pub fn runs(&self) -> impl Iterator<Item = PlannedRun> + '_ {
        let count = self.count;
        self.bases.iter().flat_map(move |b| {
            (0..count).map(move |i| {
                let mut s = b.clone();
                if let Some(l) = self.overrides.loss_of(i, count) {
                    s.link.loss = l;
                }
                PlannedRun {
                    scenario: s,
                    seed: self.first_seed.wrapping_add(i),
                }
            })
        })
    }
}

/// The value of `--option`, parsed by `parse` if given.
fn parse_opt<T>(
    option: &'static str,
    value: &Option<String>,
    parse: fn(&'static str, &str) -> Result<T, ArgError>,
) -> Result<Option<T>, ArgError> {
    value.as_deref().map(|s| parse(option, s)).transpose()
}

/// `r`'s value, or nothing after printing its error.
fn or_report<T>(r: Result<T, ArgError>) -> Option<T> {
    r.map_err(|e| eprintln!("softrnic sim: {e}")).ok()
}

/// The link and workload values given on the command line, checked.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Overrides {
    loss: Option<(f64, f64)>,
    delay: Option<Duration>,
    reorder: Option<f64>,
    duplicate: Option<f64>,
    corrupt: Option<f64>,
    bandwidth: Option<u64>,
    bytes: Option<u64>,
    shape: Option<RoundShape>,
}

impl Overrides {
    fn parse(args: &SimArgs) -> Result<Overrides, ArgError> {
        if args.seeds == Some(0) {
            return Err(arg_err(
                "seeds",
                "0",
                "a sweep runs 1 .. 18446744073709551615 seeds",
            ));
        }
        Ok(Overrides {
            loss: parse_opt("loss", &args.loss, parse_percent_range)?,
            delay: parse_opt("delay", &args.delay, parse_duration)?,
            reorder: parse_opt("reorder", &args.reorder, parse_percent)?,
            duplicate: parse_opt("duplicate", &args.duplicate, parse_percent)?,
            corrupt: parse_opt("corrupt", &args.corrupt, parse_percent)?,
            bandwidth: parse_opt("bandwidth", &args.bandwidth, parse_rate)?,
            bytes: parse_opt("bytes", &args.bytes, parse_bytes)?,
            shape: args.mix.as_deref().map(parse_mix).transpose()?,
        })
    }

    /// Applies the link values (a reordered frame is held back `reorder_delay` unless the
    /// scenario has its own).
    fn apply_link(&self, link: &mut LinkParams, reorder_delay: Duration) {
        if let Some(d) = self.delay {
            link.delay = d;
        }
        if let Some(p) = self.reorder {
            link.reorder = p;
            if link.reorder_delay.is_zero() {
                link.reorder_delay = reorder_delay;
            }
        }
        if let Some(p) = self.duplicate {
            link.duplicate = p;
        }
        if let Some(p) = self.corrupt {
            link.corrupt = p;
        }
        if let Some(b) = self.bandwidth {
            link.bandwidth_bps = Some(b);
        }
    }

    /// The loss of run `i` of `count`: a range is spread evenly over the runs.
    fn loss_of(&self, i: u64, count: u64) -> Option<f64> {
        self.loss.map(|(a, z)| {
            if count > 1 {
                a + (z - a) * i as f64 / (count - 1) as f64
            } else {
                a
            }
        })
    }
}

/// Checks the arguments and builds the [`Plan`].
pub fn plan(args: &SimArgs) -> Result<Plan, SimCmdError> {
    let names: Vec<&str> = if args.scenario == "all" {
        SCENARIOS.iter().map(|(n, _)| *n).collect()
    } else {
        vec![args.scenario.as_str()]
    };
    let o = Overrides::parse(args)?;
    let mut bases = Vec::new();
    for name in names {
        let mut s = Scenario::named(name)?;
        o.apply_link(&mut s.link, Duration::from_micros(300));
        if let Some(b) = o.bytes {
            s.bytes = b;
        }
        if let Some(m) = o.shape {
            s.shape = m;
        }
        bases.push(s);
    }
    Ok(Plan {
        bases,
        count: args.seeds.unwrap_or(1),
        first_seed: args.seed,
        overrides: o,
    })
}

fn capture_path(base: &std::path::Path, run: &PlannedRun, many: bool) -> PathBuf {
    if !many {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = base
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    base.with_file_name(format!("{stem}-{}-{}{ext}", run.scenario.name, run.seed))
}

fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

/// The table header line.
pub fn table_header() -> String {
    format!(
        "{:<17} {:>6} {:>6} {:>12} {:>12} {:>10} {:>10} {:>5} {:>4} {:>11} {:>10}",
        "scenario",
        "seed",
        "loss%",
        "bytes sent",
        "verified",
        "lost",
        "misplaced",
        "conns",
        "crc",
        "sim time",
        "wall time"
    )
}

/// One table row.
pub fn table_row(r: &RunReport) -> String {
    format!(
        "{:<17} {:>6} {:>6.2} {:>12} {:>12} {:>10} {:>10} {:>5} {:>4} {:>11} {:>10}{}",
        r.scenario,
        r.seed,
        r.loss * 100.0,
        r.bytes,
        r.verified,
        r.lost,
        r.misplaced,
        r.connections,
        r.crc_terminates,
        secs(r.sim_time),
        secs(r.wall_time),
        if r.completed { "" } else { "  INCOMPLETE" }
    )
}

/// Runs `softrnic sim`: prints the table to `out`; returns the exit status (0 all good, 1
/// something lost, misplaced or incomplete, 2 bad arguments or I/O error).
pub fn run_command(args: &SimArgs, out: &mut dyn std::io::Write) -> u8 {
    if EXPERIMENTS.iter().any(|(n, _)| *n == args.scenario) {
        return run_experiment(args, out);
    }
    if args.scenario.starts_with("sctp") {
        return run_sctp_command(args, out);
    }
    let plan = match plan(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("softrnic sim: {e}");
            return 2;
        }
    };
    let many = plan.len() > 1;
    let _ = writeln!(out, "{}", table_header());
    let mut status = 0u8;
    let mut total = RunReport {
        scenario: "total".to_string(),
        seed: plan.len(),
        loss: 0.0,
        bytes: 0,
        verified: 0,
        lost: 0,
        misplaced: 0,
        completed: true,
        sim_time: Duration::ZERO,
        wall_time: Duration::ZERO,
        connections: 0,
        retries: 0,
        crc_terminates: 0,
        other_terminates: 0,
        setup_failures: 0,
        frames: 0,
        frames_dropped: 0,
        frames_corrupted: 0,
        counters: Default::default(),
        recv_completions: 0,
        log: Vec::new(),
        capture: None,
    };
    let mut loss_sum = 0.0;
    for run in plan.runs() {
        let capture = match &args.capture {
            Some(p) => Capture::File(capture_path(p, &run, many)),
            None => Capture::None,
        };
        let r = match run.scenario.run(run.seed, capture) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("softrnic sim: {}: {e}", run.scenario.name);
                return 2;
            }
        };
        let _ = writeln!(out, "{}", table_row(&r));
        if args.verbose {
            for l in &r.log {
                let _ = writeln!(out, "    {l}");
            }
        }
        if !r.ok() {
            status = 1;
        }
        loss_sum += r.loss;
        total.bytes += r.bytes;
        total.verified += r.verified;
        total.lost += r.lost;
        total.misplaced += r.misplaced;
        total.completed &= r.completed;
        total.sim_time += r.sim_time;
        total.wall_time += r.wall_time;
        total.connections += r.connections;
        total.crc_terminates += r.crc_terminates;
    }
    total.loss = loss_sum / plan.len().max(1) as f64;
    let _ = writeln!(out, "{}", table_row(&total));
    let wall = total.wall_time.as_secs_f64();
    if wall > 0.0 {
        let _ = writeln!(
            out,
            "{} runs; {:.2} simulated seconds per wall-clock second; {:.1} MB/s of RDMA payload \
             per wall-clock second",
            plan.len(),
            total.sim_time.as_secs_f64() / wall,
            total.verified as f64 / wall / 1e6
        );
    }
    status
}

/// `softrnic sim sctp-*`: RDMA over DDP over multihomed SCTP (RFC 5043) between two hosts
/// with two paths ([`harness::sctp`]); the same table as the MPA scenarios, path events with
/// `-v`. Options that only make sense for the MPA scenarios are refused.
fn run_sctp_command(args: &SimArgs, out: &mut dyn std::io::Write) -> u8 {
    use harness::sctp::{SCENARIOS as SCTP, SctpScenario};
    let refuse = [
        (args.corrupt.is_some(), "--corrupt"),
        (args.mix.is_some(), "--mix"),
    ];
    if let Some((_, o)) = refuse.iter().find(|(given, _)| *given) {
        eprintln!(
            "softrnic sim: {o} applies to the MPA scenarios only, not to {}",
            args.scenario
        );
        return 2;
    }
    let names: Vec<&str> = if args.scenario == "sctp-all" {
        SCTP.iter().map(|(n, _)| *n).collect()
    } else {
        vec![args.scenario.as_str()]
    };
    let o = match Overrides::parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("softrnic sim: {e}");
            return 2;
        }
    };
    let count = args.seeds.unwrap_or(1);
    let _ = writeln!(out, "{}", table_header());
    let mut status = 0u8;
    for name in names {
        let Some(base) = SctpScenario::named(name) else {
            let known: Vec<&str> = SCTP.iter().map(|(n, _)| *n).collect();
            eprintln!(
                "softrnic sim: unknown scenario `{name}`; known: {}, sctp-all",
                known.join(", ")
            );
            return 2;
        };
        // Runs are produced and reported one by one: memory does not grow with the seeds.
        for i in 0..count {
            let mut s = base.clone();
            if let Some(l) = o.loss_of(i, count) {
                s.link.loss = l;
            }
            o.apply_link(&mut s.link, Duration::from_millis(3));
            if let Some(b) = o.bytes {
                s.bytes = b;
            }
            let seed = args.seed.wrapping_add(i);
            let wall = std::time::Instant::now();
            let capture = args.capture.as_ref().map(|p| {
                if count > 1 || args.scenario == "sctp-all" {
                    let mut n = p.as_os_str().to_owned();
                    n.push(format!("-{name}-{seed}.pcap"));
                    std::path::PathBuf::from(n)
                } else {
                    p.clone()
                }
            });
            let r = match harness::sctp::run_captured(&s, seed, capture.as_deref()) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("softrnic sim: {name}: {e}");
                    return 2;
                }
            };
            let row = RunReport {
                scenario: name.to_string(),
                seed,
                loss: s.link.loss,
                bytes: r.bytes,
                verified: r.verified,
                lost: r.lost,
                misplaced: r.misplaced,
                completed: r.completed,
                sim_time: r.sim_time,
                wall_time: wall.elapsed(),
                connections: 1,
                retries: 0,
                crc_terminates: 0,
                other_terminates: r.terminates,
                setup_failures: 0,
                frames: r.counters.iter().map(|c| c[0].sent + c[1].sent).sum(),
                frames_dropped: 0,
                frames_corrupted: 0,
                counters: Default::default(),
                recv_completions: 0,
                log: Vec::new(),
                capture: None,
            };
            let _ = writeln!(out, "{}", table_row(&row));
            if args.verbose {
                let _ = writeln!(
                    out,
                    "    T3-rtx timeouts {}, fast retransmits {} (both hosts)",
                    r.t3_expirations, r.fast_retransmits
                );
                for (t, e) in &r.path_events {
                    let _ = writeln!(out, "    {:>8.3} s  {e}", t.as_secs_f64());
                }
            }
            if !r.ok() {
                status = 1;
            }
        }
    }
    status
}

// ---------------------------------------------------------------------------------------------
// Experiments: `softrnic sim failover`, `softrnic sim bandwidth`
// ---------------------------------------------------------------------------------------------

/// The experiments of `softrnic sim`, with a one-line description each.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    (
        "failover",
        "two paths failing in turn over 120 s: throughput per second with multihoming, CMT, CMT-PF",
    ),
    (
        "bandwidth",
        "RDMA Write throughput per message size (64 B - 4 MiB), one vs two equal paths",
    ),
    (
        "onesided",
        "MPI-style Put and Get latency per message size (2 B - 4 MiB) over TCP and SCTP",
    ),
];

/// What the design this project comes from measured in its failover experiment on two GbE
/// paths (the secondary slower): the mean throughput of each mode.
pub const SEED_FAILOVER: [(Mode, f64); 3] = [
    (Mode::Multihoming, 911e6),
    (Mode::Cmt, 1.27e9),
    (Mode::CmtPf, 1.32e9),
];

/// What it measured in its bandwidth experiment at 1 MiB messages: one GbE path, two.
pub const SEED_BANDWIDTH_1MIB: (f64, f64) = (0.98e9, 1.7e9);

use harness::experiments::{Mode, bandwidth, failover, onesided};

/// Runs `f` on every job, on as many threads as the machine has cores (each run is one
/// single-threaded simulation); results in the order of `jobs`.
fn in_parallel<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync) -> Vec<R> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else {
                        break;
                    };
                    let r = f(job);
                    if let Ok(mut v) = results.lock() {
                        v[i] = Some(r);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}

/// The results of an experiment's `jobs` runs, or nothing after printing why there are not
/// all of them.
fn finished<T, E: std::fmt::Display>(
    experiment: &str,
    results: Result<Vec<T>, E>,
    jobs: usize,
) -> Option<Vec<T>> {
    match results {
        Ok(r) if r.len() == jobs => Some(r),
        Ok(_) => {
            eprintln!("softrnic sim: {experiment}: a run did not finish");
            None
        }
        Err(e) => {
            eprintln!("softrnic sim: {experiment}: {e}");
            None
        }
    }
}

/// Draws `chart` into `file` and names it on `out`: exit status 0, or 2 after printing why
/// it could not be drawn.
fn draw_figure(chart: &harness::plot::Chart, file: &Path, out: &mut dyn std::io::Write) -> u8 {
    match harness::plot::draw_png(chart, file) {
        Ok(()) => {
            let _ = writeln!(out, "figure: {}", file.display());
            0
        }
        Err(e) => {
            eprintln!("softrnic sim: {e}");
            2
        }
    }
}

fn mbit(bps: f64) -> String {
    format!("{:.1}", bps / 1e6)
}

/// `softrnic sim failover|bandwidth`.
fn run_experiment(args: &SimArgs, out: &mut dyn std::io::Write) -> u8 {
    let refuse = [
        (args.loss.is_some(), "--loss"),
        (args.reorder.is_some(), "--reorder"),
        (args.duplicate.is_some(), "--duplicate"),
        (args.corrupt.is_some(), "--corrupt"),
        (args.mix.is_some(), "--mix"),
        (args.capture.is_some(), "--capture"),
        (args.seeds.is_some(), "--seeds"),
        (args.bandwidth.is_some(), "--bandwidth (use --scale)"),
        (
            args.bytes.is_some() && args.scenario != "bandwidth",
            "--bytes (only the bandwidth experiment moves a set amount)",
        ),
    ];
    if let Some((_, o)) = refuse.iter().find(|(given, _)| *given) {
        eprintln!(
            "softrnic sim: {o} does not apply to the {} experiment",
            args.scenario
        );
        return 2;
    }
    if !(args.scale.is_finite() && args.scale > 0.0 && args.scale <= 100.0) {
        eprintln!(
            "softrnic sim: --scale: cannot understand `{}`: expected a factor above 0 and at \
             most 100, e.g. 0.1 or 1",
            args.scale
        );
        return 2;
    }
    let Some(delay) = or_report(parse_opt("delay", &args.delay, parse_duration)) else {
        return 2;
    };
    if args.rto_max.is_some() && args.scenario != "failover" {
        eprintln!(
            "softrnic sim: --rto-max does not apply to the {} experiment",
            args.scenario
        );
        return 2;
    }
    let rto_min = sctp::AssociationConfig::default().rto_min;
    let Some(rto_max) = or_report(parse_opt("rto-max", &args.rto_max, parse_duration)) else {
        return 2;
    };
    if let Some(d) = rto_max
        && d < rto_min
    {
        eprintln!(
            "softrnic sim: --rto-max: {} s is below RTO.Min ({} s)",
            d.as_secs_f64(),
            rto_min.as_secs_f64()
        );
        return 2;
    }
    let Some(bytes) = or_report(parse_opt("bytes", &args.bytes, parse_bytes)) else {
        return 2;
    };
    if let Some(dir) = &args.out
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        eprintln!("softrnic sim: --out {}: {e}", dir.display());
        return 2;
    }
    let rate = |r: f64| ((r * args.scale) as u64).max(1_000);
    if args.scenario == "failover" {
        let mut setup = failover::Setup::seed([rate(1e9), rate(5e8)]);
        if let Some(d) = delay {
            setup.delay = d;
        }
        if let Some(r) = rto_max {
            setup.rto_max = r;
        }
        setup.queue = args.queue;
        failover_command(args, &setup, out)
    } else if args.scenario == "onesided" {
        let mut setup = onesided::Setup::new(rate(1e9));
        if let Some(d) = delay {
            setup.delay = d;
        }
        setup.queue = args.queue;
        onesided_command(args, &setup, out)
    } else {
        let mut setup = bandwidth::Setup::new(rate(1e9), bytes.unwrap_or(64 << 20));
        if let Some(d) = delay {
            setup.delay = d;
        }
        setup.queue = args.queue;
        bandwidth_command(args, &setup, out)
    }
}

fn failover_command(args: &SimArgs, setup: &failover::Setup, out: &mut dyn std::io::Write) -> u8 {
    let wall = std::time::Instant::now();
    let runs: Result<Vec<failover::Run>, _> =
        in_parallel(&Mode::ALL, |&m| failover::run(setup, m, args.seed))
            .into_iter()
            .collect();
    let Some(runs) = finished("failover", runs, Mode::ALL.len()) else {
        return 2;
    };
    let _ = failover_report(args, setup, &runs, out);
    let _ = writeln!(
        out,
        "{} simulated seconds in {:.1} s of wall-clock time",
        setup.duration.as_secs_f64() * runs.len() as f64,
        wall.elapsed().as_secs_f64()
    );
    let mut status = 0;
    if let Some(dir) = &args.out {
        status = status.max(draw_figure(
            &failover::chart(setup, &runs),
            &dir.join("failover.png"),
            out,
        ));
    }
    if runs
        .iter()
        .any(|r| r.failed_completions > 0 || r.terminates > 0)
    {
        status = status.max(1);
    }
    status
}

fn failover_report(
    args: &SimArgs,
    setup: &failover::Setup,
    runs: &[failover::Run],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "failover: RDMA Writes of {} KiB over DDP over SCTP (RFC 5043) through the RNIC's QP \
         engine, simulated (netsim, virtual time), seed {}",
        setup.message >> 10,
        args.seed
    )?;
    writeln!(
        out,
        "paths: primary {} Mbit/s, secondary {} Mbit/s, {} us one-way, MTU {}, queues of {} \
         frames; {}",
        mbit(setup.rates[0] as f64),
        mbit(setup.rates[1] as f64),
        setup.delay.as_micros(),
        setup.mtu,
        setup.queue,
        setup.schedule()
    )?;
    writeln!(
        out,
        "SCTP: RTO.Min 1 s, RTO.Max {} s (RFC 9260 §16 suggests 60 s; --rto-max), \
         Path.Max.Retrans 5, PFMR 0 (multihoming, CMT-PF): a failed path is probed by \
         heartbeats at most RTO.Max apart",
        setup.rto_max.as_secs_f64()
    )?;
    writeln!(
        out,
        "throughput: RDMA Write payload received per second, Mbit/s (row t covers t to t+1 s)"
    )?;
    write!(out, "{:>5}", "t")?;
    for r in runs {
        write!(out, " {:>12}", r.mode.name())?;
    }
    writeln!(out)?;
    let rates: Vec<Vec<f64>> = runs.iter().map(|r| r.rates()).collect();
    let rows = rates.iter().map(Vec::len).max().unwrap_or(0);
    for t in 0..rows {
        write!(out, "{t:>5}")?;
        for r in &rates {
            write!(out, " {:>12}", r.get(t).map_or(String::new(), |&x| mbit(x)))?;
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    let capacity = setup.capacity() as f64;
    let base = runs
        .iter()
        .find(|r| r.mode == Mode::Multihoming)
        .map(|r| r.average());
    writeln!(
        out,
        "{:<12} {:>10} {:>9} {:>8} {:>14} {:>6}   {:>9} {:>8}",
        "mode", "avg Mbit/s", "capacity", "vs MH", "longest zero", "zeros", "original", "orig/MH"
    )?;
    for r in runs {
        let avg = r.average();
        let (zeros, at) = r.longest_zero_run();
        let seed = SEED_FAILOVER
            .iter()
            .find(|(m, _)| *m == r.mode)
            .map(|p| p.1);
        writeln!(
            out,
            "{:<12} {:>10} {:>8.1}% {:>7.2}x {:>14} {:>6}   {:>9} {:>7.2}x",
            r.mode.name(),
            mbit(avg),
            100.0 * avg / capacity,
            base.map_or(0.0, |b| if b > 0.0 { avg / b } else { 0.0 }),
            match at {
                Some(t) => format!("{zeros} s at {t} s"),
                None => "none".into(),
            },
            r.zero_samples(),
            seed.map_or(String::new(), |s| format!("{} Mbit/s", s / 1e6)),
            seed.map_or(0.0, |s| s / SEED_FAILOVER[0].1),
        )?;
    }
    writeln!(
        out,
        "capacity: the average as a share of the sum of the link rates ({} Mbit/s); vs MH: \
         over multihoming's average",
        mbit(capacity)
    )?;
    writeln!(
        out,
        "original: the measurement of the design softrnic comes from, on two GbE paths (the \
         secondary slower), where multihoming was at zero for 2-3 s at each failure"
    )?;
    for r in runs {
        let share: Vec<String> = r
            .path_bytes
            .iter()
            .map(|&b| format!("{:.1} MB", b as f64 / 1e6))
            .collect();
        write!(
            out,
            "{}: sent per path {}",
            r.mode.name(),
            share.join(" / ")
        )?;
        if r.failed_completions > 0 || r.terminates > 0 {
            write!(
                out,
                "; {} failed completions, {} Terminates",
                r.failed_completions, r.terminates
            )?;
        }
        writeln!(out)?;
        if args.verbose {
            for (t, e) in &r.path_events {
                writeln!(out, "    {:>8.3} s  {e}", t.as_secs_f64())?;
            }
        }
    }
    Ok(())
}

fn bandwidth_command(args: &SimArgs, setup: &bandwidth::Setup, out: &mut dyn std::io::Write) -> u8 {
    let wall = std::time::Instant::now();
    let jobs: Vec<(usize, usize)> = setup.sizes.iter().flat_map(|&s| [(1, s), (2, s)]).collect();
    let results: Result<Vec<bandwidth::Sample>, _> = in_parallel(&jobs, |&(paths, size)| {
        bandwidth::throughput(setup, paths, size, args.seed)
    })
    .into_iter()
    .collect();
    let Some(results) = finished("bandwidth", results, jobs.len()) else {
        return 2;
    };
    let points: Vec<bandwidth::Point> = setup
        .sizes
        .iter()
        .zip(results.chunks(2))
        .map(|(&size, t)| bandwidth::Point {
            size,
            one: t[0],
            two: t[1],
        })
        .collect();
    let _ = bandwidth_report(args, setup, &points, out);
    let _ = writeln!(
        out,
        "{} runs in {:.1} s of wall-clock time",
        jobs.len(),
        wall.elapsed().as_secs_f64()
    );
    let mut status = 0;
    if let Some(dir) = &args.out {
        status = status.max(draw_figure(
            &bandwidth::chart(setup, &points),
            &dir.join("bandwidth.png"),
            out,
        ));
    }
    if points.iter().any(|p| p.one.bps <= 0.0 || p.two.bps <= 0.0) {
        status = status.max(1);
    }
    status
}

fn bandwidth_report(
    args: &SimArgs,
    setup: &bandwidth::Setup,
    points: &[bandwidth::Point],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "bandwidth: RDMA Writes over DDP over SCTP (RFC 5043) through the RNIC's QP engine, \
         simulated (netsim, virtual time), seed {}",
        args.seed
    )?;
    writeln!(
        out,
        "paths: {} Mbit/s each, {} us one-way, MTU {}, queues of {} frames; {}; {} per size",
        mbit(setup.rate as f64),
        setup.delay.as_micros(),
        setup.mtu,
        setup.queue,
        setup.mode.name(),
        harness::plot::size_label(setup.bytes as f64)
    )?;
    writeln!(
        out,
        "throughput: RDMA Write payload from the first Write posted to the last byte received"
    )?;
    writeln!(
        out,
        "{:>9} {:>16} {:>17} {:>8} {:>9} {:>16}",
        "size", "one path Mbit/s", "two paths Mbit/s", "two/one", "capacity", "T3/FR/drops"
    )?;
    for p in points {
        writeln!(
            out,
            "{:>9} {:>16} {:>17} {:>7.2}x {:>8.1}% {:>16}",
            harness::plot::size_label(p.size as f64),
            mbit(p.one.bps),
            mbit(p.two.bps),
            p.ratio(),
            100.0 * p.two.bps / (2.0 * setup.rate as f64),
            format!(
                "{}/{}/{}",
                p.two.timeouts, p.two.fast_retransmits, p.two.queue_drops
            )
        )?;
    }
    writeln!(
        out,
        "capacity: two paths' throughput as a share of the sum of the link rates; T3/FR/drops: \
         over two paths, the sender's retransmission timeouts and fast retransmits and the \
         frames dropped at full link queues"
    )?;
    let (one, two) = SEED_BANDWIDTH_1MIB;
    writeln!(
        out,
        "original: at 1 MiB, {} Mbit/s over one GbE path and {} Mbit/s over two ({:.2}x)",
        one / 1e6,
        two / 1e6,
        two / one
    )
}

fn onesided_command(args: &SimArgs, setup: &onesided::Setup, out: &mut dyn std::io::Write) -> u8 {
    use onesided::{Op, Transport};
    let wall = std::time::Instant::now();
    let jobs: Vec<(Op, Transport)> = Op::ALL
        .iter()
        .flat_map(|&o| Transport::ALL.iter().map(move |&t| (o, t)))
        .collect();
    let curves: Result<Vec<onesided::Curve>, _> =
        in_parallel(&jobs, |&(op, t)| onesided::curve(setup, op, t, args.seed))
            .into_iter()
            .collect();
    let Some(curves) = finished("onesided", curves, jobs.len()) else {
        return 2;
    };
    let _ = onesided_report(args, setup, &curves, out);
    let verified: u64 = curves.iter().map(|c| c.verified_bytes).sum();
    let mut status = 0;
    let bad: Vec<&onesided::Curve> = curves.iter().filter(|c| c.mismatch.is_some()).collect();
    if bad.is_empty() {
        let _ = writeln!(
            out,
            "every transfer's bytes checked at their target: {verified} bytes as sent"
        );
    } else {
        for c in bad {
            if let Some(m) = &c.mismatch {
                eprintln!(
                    "softrnic sim: onesided: {} over {}: {m}",
                    c.op.name(),
                    c.transport.name()
                );
            }
        }
        status = 1;
    }
    let _ = writeln!(
        out,
        "{} runs in {:.1} s of wall-clock time",
        jobs.len(),
        wall.elapsed().as_secs_f64()
    );
    if let Some(dir) = &args.out {
        for op in Op::ALL {
            let name = match op {
                Op::Put => "onesided-put.png",
                Op::GetRead => "onesided-get-read.png",
                Op::GetWrite => "onesided-get-write.png",
            };
            let chart = onesided::chart(setup, op, &curves);
            status = status.max(draw_figure(&chart, &dir.join(name), out));
        }
    }
    if curves
        .iter()
        .any(|c| c.failed_completions > 0 || c.points.len() != setup.sizes.len())
    {
        status = status.max(1);
    }
    status
}

fn onesided_report(
    args: &SimArgs,
    setup: &onesided::Setup,
    curves: &[onesided::Curve],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "onesided: MPI-style one-sided operations through the RNIC's QP engine, simulated \
         (netsim, virtual time), seed {}",
        args.seed
    )?;
    writeln!(
        out,
        "links: {} Mbit/s, {} us one-way, queues of {} frames; TCP: MPA with CRC over one link; \
         SCTP: DDP over SCTP (RFC 5043), two paths with CMT-PF",
        mbit(setup.rate as f64),
        setup.delay.as_micros(),
        setup.queue
    )?;
    writeln!(
        out,
        "Put: RDMA Write + notification Send, acknowledged; Get (Read): RDMA Read; Get \
         (Write): request Send, the target's RDMA Write + notification Send. Each is fenced \
         (complete at both ends before the next); mean of {} after {} of warm-up, in us",
        setup.iterations, setup.warmup
    )?;
    write!(out, "{:>9}", "size")?;
    for c in curves {
        write!(out, " {:>11}", short_name(c))?;
    }
    writeln!(out)?;
    for (i, &size) in setup.sizes.iter().enumerate() {
        write!(out, "{:>9}", harness::plot::size_label(size as f64))?;
        for c in curves {
            match c.points.get(i) {
                Some(&(_, d)) => write!(out, " {:>11.1}", d.as_secs_f64() * 1e6)?,
                None => write!(out, " {:>11}", "-")?,
            }
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "columns: operation/transport (P Put, GR Get via Read, GW Get via Write; TCP, SCTP1 \
         one path, SCTP2 two paths)"
    )
}

fn short_name(c: &onesided::Curve) -> String {
    use onesided::{Op, Transport};
    let op = match c.op {
        Op::Put => "P",
        Op::GetRead => "GR",
        Op::GetWrite => "GW",
    };
    let t = match c.transport {
        Transport::Tcp => "TCP",
        Transport::Sctp1 => "SCTP1",
        Transport::Sctp2 => "SCTP2",
    };
    format!("{op}/{t}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_accept_units_and_reject_nonsense() {
        assert_eq!(parse_percent("loss", "1").unwrap(), 0.01);
        assert_eq!(parse_percent("loss", "50%").unwrap(), 0.5);
        assert!(parse_percent("loss", "101").is_err());
        assert!(parse_percent("loss", "x").is_err());
        assert_eq!(parse_percent_range("loss", "0..10").unwrap(), (0.0, 0.1));
        assert_eq!(
            parse_duration("delay", "100us").unwrap(),
            Duration::from_micros(100)
        );
        assert_eq!(
            parse_duration("delay", "1.5ms").unwrap(),
            Duration::from_micros(1500)
        );
        assert!(parse_duration("delay", "5 parsecs").is_err());
        assert_eq!(parse_bytes("bytes", "4M").unwrap(), 4 << 20);
        assert_eq!(parse_bytes("bytes", "100MiB").unwrap(), 100 << 20);
        assert_eq!(parse_bytes("bytes", "1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_bytes("bytes", "1234").unwrap(), 1234);
        assert_eq!(parse_bytes("bytes", "100k").unwrap(), 100 << 10);
        assert_eq!(parse_bytes("bytes", "1MB").unwrap(), 1_000_000);
        assert!(parse_bytes("bytes", "-1").is_err());
        assert!(
            parse_bytes("bytes", "0").is_err(),
            "a run moves at least a byte"
        );
        assert_eq!(parse_rate("bandwidth", "1G").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("bandwidth", "100Mbit/s").unwrap(), 100_000_000);
        assert!(parse_rate("bandwidth", "0").is_err());
        assert_eq!(parse_mix("write").unwrap().bytes(), (1 << 20) + 1);
        assert_eq!(parse_mix("mixed").unwrap(), RoundShape::default());
        assert!(parse_mix("atomics").is_err());
    }

    #[test]
    fn default_args_match_the_command_line_defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            args: SimArgs,
        }
        assert_eq!(Cmd::parse_from(["sim"]).args, SimArgs::default());
        let a = Cmd::parse_from(["sim", "corrupt", "--seeds", "5", "--loss", "0..10"]).args;
        assert_eq!(a.scenario, "corrupt");
        assert_eq!(a.seeds, Some(5));
    }

    #[test]
    fn all_plans_every_named_scenario_and_zero_seeds_are_refused() {
        let args = SimArgs {
            scenario: "all".into(),
            seeds: Some(3),
            ..SimArgs::default()
        };
        let p = plan(&args).unwrap();
        assert_eq!(p.len(), SCENARIOS.len() as u64 * 3);
        assert_eq!(p.runs().count(), SCENARIOS.len() * 3);
        let zero = SimArgs {
            seeds: Some(0),
            ..args
        };
        let e = plan(&zero).unwrap_err().to_string();
        assert!(e.starts_with("--seeds: cannot understand `0`"), "{e}");
    }

    /// A sweep is produced run by run: planning 2^64 - 1 seeds allocates nothing per seed
    /// (it used to build every run first: gigabytes), and the runs come out in order.
    #[test]
    fn a_huge_sweep_is_planned_lazily() {
        let args = SimArgs {
            scenario: "all".into(),
            seeds: Some(u64::MAX),
            loss: Some("0..10".into()),
            ..SimArgs::default()
        };
        let p = plan(&args).unwrap();
        assert_eq!(p.len(), u64::MAX);
        let first: Vec<PlannedRun> = p.runs().take(3).collect();
        assert_eq!(
            first.iter().map(|r| r.seed).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert!(first[1].scenario.link.loss > 0.0 && first[1].scenario.link.loss < 1e-12);
    }
}
