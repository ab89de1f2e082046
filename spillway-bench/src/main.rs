//! `spillway-bench`: the load generator (see the `spillway_bench` library and benches/README.md).
//!
//! `spillway-bench run [options]` writes and reads a shuffle with verification and prints the
//! report; it exits 1 on any lost or corrupt byte. `spillway-bench discard` is the discard
//! server the run starts for its transport ceiling.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    version,
    about = "Load generator for Uniffle-compatible shuffle servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write, read back and verify a shuffle; measure the ceilings in the same run.
    Run(Box<spillway_bench::Options>),
    /// Write a shuffle (kept in memory), restart the server, measure how long requests went
    /// unserved and how many connections were refused, then verify every block.
    Restart {
        /// SIGTERM then start, or a `--takeover` start.
        #[arg(long, value_enum, default_value = "sigterm")]
        mode: spillway_bench::restart::Mode,
        #[command(flatten)]
        opts: Box<spillway_bench::Options>,
    },
    /// Measure cost curves at growing scale (heap per block id and partition, descriptors,
    /// journal and restart, block-id call latencies, call latencies against concurrent apps,
    /// back-pressure fairness); tables, CSV and SVG plots.
    Curves(Box<spillway_bench::curves::CurveOptions>),
    /// The coordinator at cluster scale: a coordinator-only process under simulated servers,
    /// apps and assignments (every answer checked); latency, CPU, RSS, REST and dashboard
    /// times per size, and a coordinator pair's fail-over.
    CoordinatorScale(Box<spillway_bench::coordinator_scale::ScaleOptions>),
    /// A 3-server cluster under continuous apps and seeded faults; fails on a lost block, a
    /// panic or a resource growing past its bound (see `spillway_bench::soak`).
    Soak(Box<spillway_bench::soak::SoakOptions>),
    /// Change one record count a server holds for a running app (the Spark harness's negative
    /// integrity cell: the reader must then fail with "Inconsistent number of records").
    SkewRecords(spillway_bench::skew_records::SkewOptions),
    /// Serve the discard endpoints (gRPC and Netty) until killed.
    Discard {
        /// gRPC port (0: ephemeral).
        #[arg(long, default_value_t = 0)]
        grpc_port: u16,
        /// Netty port (0: ephemeral).
        #[arg(long, default_value_t = 0)]
        netty_port: u16,
    },
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut cli = Cli::parse();
    // Before the runtime: a network namespace is entered by the only thread there is.
    if let Command::Soak(opts) = &mut cli.command {
        if let Err(e) = spillway_bench::soak::netns::enter(opts) {
            eprintln!("spillway-bench soak: {e:#}");
            return std::process::ExitCode::from(2);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("spillway-bench: tokio runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(opts) => {
                let report = spillway_bench::run(&opts).await?;
                print!("{report}");
                Ok(report.verified())
            }
            Command::Restart { mode, opts } => {
                let report = spillway_bench::restart::measure(&opts, mode).await?;
                print!("{report}");
                Ok(report.ok)
            }
            Command::Curves(opts) => spillway_bench::curves::run(&opts).await.map(|_| true),
            Command::CoordinatorScale(opts) => spillway_bench::coordinator_scale::run(&opts).await,
            Command::Soak(opts) => {
                let outcome = spillway_bench::soak::run(&opts).await?;
                print!("{}", outcome.report);
                Ok(outcome.ok)
            }
            Command::SkewRecords(opts) => {
                println!("{}", spillway_bench::skew_records::run(&opts).await?);
                Ok(true)
            }
            Command::Discard {
                grpc_port,
                netty_port,
            } => spillway_bench::serve_discard(grpc_port, netty_port)
                .await
                .map(|()| true),
        }
    });
    match outcome {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("spillway-bench: verification FAILED");
            std::process::ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("spillway-bench: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
