//! `forwarder-bench`: frame rate and bandwidth the forwarder delivers to 1 and 8 loopback
//! clients for 1 M particles (positions only, f32 and quantised), and its CPU use.
//! Writes `bench/results/forwarder.json` and prints a table.
//!
//! `cargo run --release -p forwarder --bin forwarder-bench [-- --particles N --seconds S --publish-hz HZ]`

use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use forwarder::codec;
use forwarder::protocol::{
    ClientMsg, PositionEncoding, ServerMsg, Subscription, PROTOCOL_NAME, PROTOCOL_VERSION,
};
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use shm_protocol::FieldKind;

#[derive(Parser, Debug)]
struct Args {
    /// Particles of the fake solver (1 to 20,000,000: its segment then holds about 1 GB).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(1..=20_000_000))]
    particles: u32,
    /// Measurement window per case [s] (0.1 to 86400).
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = window)]
    seconds: Duration,
    /// Rate the fake solver publishes at [Hz] (at least 1/86400).
    #[arg(long, value_name = "HZ", default_value_t = 60.0, value_parser = publish_hz)]
    publish_hz: f64,
    /// Output file (default: bench/results/forwarder.json in the workspace).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn window(text: &str) -> Result<Duration, String> {
    forwarder::values::seconds_arg("--seconds", text, 0.1)
}

/// A rate whose period is a valid duration.
fn publish_hz(text: &str) -> Result<f64, String> {
    let hz: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("--publish-hz expects a number, got {text:?}"))?;
    forwarder::values::rate_period("--publish-hz", hz).map(|_| hz)
}

#[derive(Default)]
struct Counters {
    frames: AtomicU64,
    bytes: AtomicU64,
}

/// A client that only counts: reads every message and decodes its header.
fn client(
    addr: String,
    enc: PositionEncoding,
    stop: Arc<AtomicBool>,
    c: Arc<Counters>,
) -> anyhow::Result<()> {
    let mut s = TcpStream::connect(&addr)?;
    s.set_nodelay(true)?;
    let hello = ClientMsg::Hello {
        protocol: PROTOCOL_NAME.into(),
        version: PROTOCOL_VERSION,
        token: String::new(),
        client: "bench".into(),
        subscription: Subscription {
            fields: FieldKind::Position.bit(),
            positions: enc,
            max_rate_hz: 0.0,
            static_arrays: false,
            max_particles: 0,
        },
    };
    s.write_all(&codec::encode_tcp(&hello))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    while !stop.load(Ordering::Relaxed) {
        let body = codec::read_message(&mut s, 1 << 30)?;
        if let (ServerMsg::Frame(_), _) = codec::decode_server(&body)? {
            c.frames.fetch_add(1, Ordering::Relaxed);
            c.bytes.fetch_add(body.len() as u64 + 4, Ordering::Relaxed);
        }
    }
    Ok(())
}

struct Case {
    clients: usize,
    enc: PositionEncoding,
}

fn run_case(
    fw: &ForwarderProcess,
    solver: &FakeSolver,
    case: &Case,
    window: Duration,
) -> serde_json::Value {
    let stop = Arc::new(AtomicBool::new(false));
    let counters: Vec<Arc<Counters>> = (0..case.clients).map(|_| Arc::default()).collect();
    let threads: Vec<_> = counters
        .iter()
        .map(|c| {
            let (addr, stop, c, enc) = (fw.addr.clone(), stop.clone(), c.clone(), case.enc);
            std::thread::spawn(move || client(addr, enc, stop, c))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1)); // warm up: connect, first frames
    let snap = |cs: &[Arc<Counters>]| -> Vec<(u64, u64)> {
        cs.iter()
            .map(|c| {
                (
                    c.frames.load(Ordering::Relaxed),
                    c.bytes.load(Ordering::Relaxed),
                )
            })
            .collect()
    };
    let (c0, cpu0, p0, t0) = (
        snap(&counters),
        fw.cpu_seconds(),
        solver.published.load(Ordering::Relaxed),
        Instant::now(),
    );
    std::thread::sleep(window);
    let (c1, cpu1, p1, dt) = (
        snap(&counters),
        fw.cpu_seconds(),
        solver.published.load(Ordering::Relaxed),
        t0.elapsed().as_secs_f64(),
    );
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let fps: Vec<f64> = c0
        .iter()
        .zip(&c1)
        .map(|(a, b)| (b.0 - a.0) as f64 / dt)
        .collect();
    let bytes: u64 = c0.iter().zip(&c1).map(|(a, b)| b.1 - a.1).sum();
    let mean = fps.iter().sum::<f64>() / fps.len() as f64;
    let min = fps.iter().cloned().fold(f64::INFINITY, f64::min);
    serde_json::json!({
        "clients": case.clients,
        "encoding": format!("{:?}", case.enc),
        "solver_fps": (p1 - p0) as f64 / dt,
        "fps_per_client_mean": mean,
        "fps_per_client_min": min,
        "total_mb_per_s": bytes as f64 / dt / 1e6,
        "forwarder_cpu_percent": (cpu1 - cpu0) / dt * 100.0,
        "rss_mib": fw.rss_kib() as f64 / 1024.0,
    })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let exe = std::env::current_exe()?.with_file_name("forwarder");
    anyhow::ensure!(
        exe.exists(),
        "{} not found: build it (cargo build --release -p forwarder)",
        exe.display()
    );
    let name = unique_name("bench");
    let interval = forwarder::values::rate_period("--publish-hz", args.publish_hz)
        .map_err(anyhow::Error::msg)?;
    let solver = FakeSolver::start(
        &name,
        SolverOptions {
            particles: args.particles as usize,
            fields: FieldKind::Position.bit(),
            interval,
            reuse_positions: true,
        },
    );
    let fw = ForwarderProcess::start(&exe, &name, &[]);
    let cases = [
        Case {
            clients: 1,
            enc: PositionEncoding::F32,
        },
        Case {
            clients: 1,
            enc: PositionEncoding::Quantized16,
        },
        Case {
            clients: 8,
            enc: PositionEncoding::F32,
        },
        Case {
            clients: 8,
            enc: PositionEncoding::Quantized16,
        },
    ];
    let mut results = Vec::new();
    println!("forwarder bench: {} particles, positions only, solver publishing at up to {} Hz, {} s per case, {} cores",
        args.particles, args.publish_hz, args.seconds.as_secs_f64(), std::thread::available_parallelism().map_or(0, |n| n.get()));
    println!(
        "{:>7} {:>12} {:>10} {:>12} {:>11} {:>11} {:>8} {:>8}",
        "clients",
        "encoding",
        "solver fps",
        "fps/client",
        "min fps",
        "total MB/s",
        "fw CPU%",
        "RSS MiB"
    );
    for case in &cases {
        let r = run_case(&fw, &solver, case, args.seconds);
        println!(
            "{:>7} {:>12} {:>10.1} {:>12.1} {:>11.1} {:>11.1} {:>8.0} {:>8.0}",
            r["clients"],
            r["encoding"].as_str().unwrap_or(""),
            r["solver_fps"].as_f64().unwrap_or(0.0),
            r["fps_per_client_mean"].as_f64().unwrap_or(0.0),
            r["fps_per_client_min"].as_f64().unwrap_or(0.0),
            r["total_mb_per_s"].as_f64().unwrap_or(0.0),
            r["forwarder_cpu_percent"].as_f64().unwrap_or(0.0),
            r["rss_mib"].as_f64().unwrap_or(0.0)
        );
        results.push(r);
    }
    drop(fw);
    solver.stop();
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../bench/results/forwarder.json"
        ))
    });
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let out = out
        .parent()
        .and_then(|d| d.canonicalize().ok())
        .map_or(out.clone(), |d| d.join(out.file_name().unwrap_or_default()));
    let doc = serde_json::json!({
        "bench": "forwarder",
        "particles": args.particles,
        "fields": "position",
        "publish_hz": args.publish_hz,
        "seconds_per_case": args.seconds.as_secs_f64(),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "note": "fake solver, forwarder and clients share this machine's cores over loopback",
        "results": results,
    });
    std::fs::write(&out, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {}", out.display());
    Ok(())
}
