//! `forwarder --attach NAME --listen ADDR:PORT`: serves a running solver's segment over the
//! network (binary protocol, WebSocket and a browser page on one port).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use forwarder::server::{self, Config};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Serve a particle-shm segment over TCP, WebSocket and a browser page",
    // `--stall-timeout-s -1` reaches the option's own check, not clap's "unexpected argument".
    allow_negative_numbers = true
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
    /// File whose content (surrounding whitespace trimmed) is the token (at most 64 KiB read).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Most clients served at once (1 to 65536).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=MAX_CLIENTS))]
    max_clients: u32,
    /// Disconnect a client that has not taken one whole message for this many seconds (1 to
    /// 86400: below 1 s, writing one large frame over an ordinary network already takes longer).
    #[arg(long = "stall-timeout-s", value_name = "SECONDS", default_value = "30", value_parser = stall_timeout)]
    stall_timeout: Duration,
}

/// Upper bound of `--max-clients`: each client is a socket (file descriptor) and a task; the
/// bound also keeps the count within what a semaphore can hold.
const MAX_CLIENTS: i64 = 65_536;
/// Shortest `--stall-timeout-s` [s].
const STALL_TIMEOUT_MIN_S: f64 = 1.0;
/// Most bytes read from `--token-file`: a token is at most `MAX_TOKEN_LEN` bytes, the rest is
/// room for whitespace; a larger file (or `/dev/zero`) is refused instead of read forever.
const TOKEN_FILE_MAX: u64 = 64 * 1024;

fn stall_timeout(text: &str) -> Result<Duration, String> {
    forwarder::values::seconds_arg("--stall-timeout-s", text, STALL_TIMEOUT_MIN_S)
}

/// The token file's content, surrounding whitespace trimmed.
fn read_token_file(path: &Path) -> anyhow::Result<String> {
    let context = || format!("reading the token file {}", path.display());
    let mut text = String::new();
    std::fs::File::open(path)
        .with_context(context)?
        .take(TOKEN_FILE_MAX + 1)
        .read_to_string(&mut text)
        .with_context(context)?;
    if text.len() as u64 > TOKEN_FILE_MAX {
        anyhow::bail!(
            "the token file {} is larger than {TOKEN_FILE_MAX} bytes: not a token file",
            path.display()
        );
    }
    Ok(text.trim().to_string())
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
        (None, Some(path)) => Some(read_token_file(path)?),
        (None, None) => None,
    };
    shm_protocol::validate_name(&args.attach)
        .map_err(|reason| anyhow::anyhow!("invalid segment name {:?}: {reason}", args.attach))?;
    let config = Config {
        segment: args.attach,
        listen: args.listen,
        token,
        max_clients: args.max_clients as usize,
        stall_timeout: args.stall_timeout,
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
