//! The `spillway` binary: parse arguments, load the config, set up logging, serve until
//! SIGTERM/SIGINT, shut down in order, exit 0.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod deploy;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// jemalloc as the allocator (feature `jemalloc`, on by default): it returns an idle server's
/// memory to the OS (see `tasks::release`), gives allocator stats in `/metrics/jvm`, and heap
/// profiles at `/debug/pprof/heap` when started with `_RJEM_MALLOC_CONF=prof:true`.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at start-up (`_RJEM_MALLOC_CONF` still overrides each key).
///
/// `oversize_threshold:0`: by default every allocation of 8 MiB or more goes to a dedicated
/// arena that jemalloc purges eagerly (decay 0), so each 14 MiB read buffer, each large request
/// buffer and each encoded read response was faulted in fresh and handed back with `madvise`
/// right after. That was the whole of jemalloc's former 1.8× CPU per GB against glibc (reads
/// 1.8–2.0 vs 0.9–1.2 CPU-s/GB with and without it, in one run; benches/README.md). Large
/// buffers now live in the ordinary arenas and are reused under their decay.
///
/// `background_thread:true`: decay then runs on jemalloc's own threads, so freed pages go back
/// to the OS while the server is idle too, not only when later allocations tick the decay.
///
/// `thp:always,metadata_thp:always`: jemalloc asks for transparent huge pages on the memory it
/// maps (`madvise`, which the kernel's default THP mode honours), so a stored GiB of blocks
/// takes 512 first-touch page faults instead of 262,144. Those faults were 9-15 % of the
/// server's CPU with the real client; with huge pages its CPU per GB fell 13-55 % (Netty within
/// 0.01-0.19 CPU-s/GB of a server that stores nothing), and RSS rises: 34-240 MiB at peak,
/// ~52 instead of ~18 MiB idle with eight arenas, ~20 with one (partly used huge pages count
/// whole). Quiet runs side by side, benches/README.md round 6. An operator who wants the
/// smaller footprint sets
/// `_RJEM_MALLOC_CONF=thp:default,metadata_thp:disabled`.
///
/// `narenas:1`: one arena for every thread. With jemalloc's default (four per CPU) each thread
/// that frees a block's memory returns it to the arena of the thread that allocated it, and each
/// arena keeps its freed pages for the decay time before the next allocation on another arena
/// could use them. Requests move between tokio's workers, so each worker's arena grew towards the
/// whole memory tier: with the real client's spill preset (256 MiB capacity) the gRPC server
/// held 670–880 MiB at peak while jemalloc counted 320 MiB allocated. One arena reuses what any
/// thread freed: 465–511 MiB in the same runs, CPU per GB unchanged within the runs' spread
/// (benches/README.md round 7). Small allocations stay in each thread's cache, so the shared
/// arena's locks are taken only on cache refills and for large buffers. An operator on a host
/// with many cores who sees allocator contention can set `_RJEM_MALLOC_CONF=narenas:N`.
#[cfg(feature = "jemalloc")]
#[allow(unsafe_code)]
// an exported symbol jemalloc reads at start-up; see SAFETY
// SAFETY: jemalloc declares `_rjem_malloc_conf` as a weak `const char *`; this defines it as a
// pointer (a thin reference) to a NUL-terminated string that lives for the whole process.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8; 85] =
    b"oversize_threshold:0,background_thread:true,thp:always,metadata_thp:always,narenas:1\0";

/// A Uniffle-compatible shuffle server.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Config file: TOML, or the Java server's `server.conf` as it is. Without it,
    /// `WORKER_CONFIG_PATH`, else built-in defaults.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Log as JSON lines instead of text.
    #[arg(long)]
    log_json: bool,
    /// Replace a running server of the same state (upgrade): bind the ports beside it, ask it
    /// to stop, and serve once it has saved everything (`recovery.takeover`).
    #[arg(long)]
    takeover: bool,
    /// Print the effective config (file, env and defaults) as TOML, each key followed by the
    /// Java keys that set it, and exit, e.g. to see what a Java `server.conf` became.
    #[arg(long)]
    print_config: bool,
    /// Without a subcommand the server runs.
    #[command(subcommand)]
    command: Option<Command>,
}

/// What to do instead of serving.
#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Print a deployment file (Dockerfile, Kubernetes YAML, systemd unit) filled from the config.
    Deploy {
        /// Which file.
        kind: deploy::Kind,
        /// Config file, as the top-level `--config` (which it overrides).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Dockerfile only: package a binary built elsewhere (`spillway` in the build context,
        /// linked against glibc 2.36 or older) instead of compiling it in a build stage.
        #[arg(long)]
        prebuilt: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(Command::Deploy {
        kind,
        config,
        prebuilt,
    }) = &args.command
    {
        return deploy::run(
            *kind,
            config.as_deref().or(args.config.as_deref()),
            *prebuilt,
        );
    }
    let env = |key: &str| std::env::var(key).ok();
    let mut config = spillway::config::Config::load(args.config.as_deref(), &env)?;
    config.recovery.takeover |= args.takeover;
    if args.print_config {
        for warning in spillway::config::java::take_warnings() {
            eprintln!("warning: {warning}");
        }
        // Secrets among the Hadoop conf items are masked (`config::sensitive`).
        let toml = toml::to_string(&config.redacted())?;
        print!("{}", spillway::config::java::names::with_java_names(&toml));
        return Ok(());
    }

    // hdfs-native warns on every failed NameNode call it retries (one line per attempt while a
    // NameNode is down); the spill path names the cause once per app (`store::admission`, `store::causes`), so
    // by default only its errors show. RUST_LOG overrides all of it.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,hdfs_native::hdfs::proxy=error"));
    let fmt = if args.log_json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter)
            .boxed()
    } else {
        // Colour codes only for a terminal: log files and scrapers get plain text.
        tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .with_filter(filter)
            .boxed()
    };
    let registry = tracing_subscriber::registry().with(fmt);
    #[cfg(feature = "console")]
    let registry = registry.with(console_layer(&config));
    registry.init();
    for warning in spillway::config::java::take_warnings() {
        tracing::warn!("{warning}");
    }

    let runtime = spillway::runtime::build().context("building the tokio runtime")?;
    let outcome = runtime.block_on(async {
        if config.role == spillway::config::Role::Coordinator {
            let running = spillway::server::coordinator_process::start(config).await?;
            running.run_until(shutdown_signal()).await;
            return anyhow::Ok(());
        }
        let running = spillway::server::start(config).await?;
        let report = running.run_until(shutdown_signal()).await;
        if report.bytes_left_in_memory > 0 {
            tracing::warn!(
                bytes = report.bytes_left_in_memory,
                "exiting with data left in memory"
            );
        }
        anyhow::Ok(())
    });
    // A blocking file call stuck on a dead disk must not keep the process alive: everything
    // that could be spilled has been by now.
    runtime.shutdown_timeout(std::time::Duration::from_secs(5));
    outcome
}

/// The tokio-console server on `bind_ip:metrics.console_port` (feature `console`; the binary
/// must be built with `RUSTFLAGS="--cfg tokio_unstable"` for the runtime to emit task events).
#[cfg(feature = "console")]
fn console_layer<S>(config: &spillway::config::Config) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let ip: std::net::IpAddr = config
        .bind_ip
        .parse()
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let addr = std::net::SocketAddr::new(ip, config.metrics.console_port);
    eprintln!("tokio-console server on {addr}");
    console_subscriber::ConsoleLayer::builder()
        .server_addr(addr)
        .spawn()
}

/// SIGTERM or SIGINT.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            // Without signal handlers we can still stop on Ctrl-C.
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
