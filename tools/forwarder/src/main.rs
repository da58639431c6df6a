//! `forwarder --attach NAME --listen ADDR:PORT`: serves a running solver's segment over the
//! network (binary protocol, WebSocket and a browser page on one port).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use forwarder::server::{self, Config};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Serve a particle-shm segment over TCP, WebSocket and a browser page"
)]
struct Args {
    /// Segment name to follow (re-attached by name when the solver restarts).
    #[arg(long)]
    attach: String,
    /// Address to listen on. Anything but loopback requires --token or --token-file.
    #[arg(long, default_value = "127.0.0.1:7788")]
    listen: SocketAddr,
    /// Token every client must present (visible in `ps`: prefer --token-file).
    #[arg(long, conflicts_with = "token_file")]
    token: Option<String>,
    /// File whose content (surrounding whitespace trimmed) is the token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Most clients served at once.
    #[arg(long, default_value_t = 64)]
    max_clients: usize,
    /// Disconnect a client whose socket accepts nothing for this many seconds.
    #[arg(long, default_value_t = 30.0)]
    stall_timeout_s: f64,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Err(e) = run(Args::parse()) {
        eprintln!("forwarder: {}", shm_protocol::error_report(&e));
        std::process::exit(1);
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let token = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the token file {}", path.display()))?
                .trim()
                .to_string(),
        ),
        (None, None) => None,
    };
    shm_protocol::validate_name(&args.attach)
        .map_err(|reason| anyhow::anyhow!("invalid segment name {:?}: {reason}", args.attach))?;
    if !(args.stall_timeout_s.is_finite() && args.stall_timeout_s > 0.0) {
        anyhow::bail!("--stall-timeout-s must be > 0");
    }
    let config = Config {
        segment: args.attach,
        listen: args.listen,
        token,
        max_clients: args.max_clients.max(1),
        stall_timeout: Duration::from_secs_f64(args.stall_timeout_s),
    };
    server::auth::check_listen(&config.listen, config.token.as_deref())
        .map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("forwarder")
        .build()?;
    runtime.block_on(server::serve(config, |addr| {
        // One line on stdout for scripts and tests started with port 0.
        println!("listening on {addr}");
        let _ = std::io::stdout().flush();
    }))
}
