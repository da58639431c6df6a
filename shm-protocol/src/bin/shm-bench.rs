//! `shm-bench`: frame publication throughput against plain `memcpy`, and publish-to-wake-up
//! latency with 1, 4 and 16 waiting consumer processes. Prints a table (or `--json`) and writes
//! `bench/results/shm.json` with `--out`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command as Proc, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;
use shm_protocol::*;

#[derive(Parser)]
#[command(about = "Benchmark shm-protocol publication bandwidth and wake-up latency")]
struct Cli {
    /// Print only one JSON object.
    #[arg(long)]
    json: bool,
    /// Also write the JSON object to this file (e.g. bench/results/shm.json).
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Frames per latency measurement (per consumer count).
    #[arg(long, default_value_t = 400)]
    latency_frames: u64,
    /// Internal: run as a waiting consumer of segment NAME.
    #[arg(long, hide = true)]
    child: Option<String>,
}

const FIELDS: [FieldKind; 3] = [
    FieldKind::Position,
    FieldKind::Velocity,
    FieldKind::AngularVelocity,
];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Best-of-reps bandwidth of the same copies a publication does, into plain heap memory: three
/// arrays of `n` `[f32; 3]`, rotating over three destinations like the frame slots (GB/s,
/// counting bytes written).
fn memcpy_gbps(n: usize, reps: usize) -> f64 {
    let src: Vec<Vec<[f32; 3]>> = (0..3).map(|k| vec![[k as f32; 3]; n]).collect();
    let mut slots: Vec<Vec<Vec<[f32; 3]>>> = (0..3)
        .map(|_| (0..3).map(|_| vec![[0.0; 3]; n]).collect())
        .collect();
    let mut best = f64::MAX;
    for rep in 0..reps + 3 {
        let dst = &mut slots[rep % 3];
        let t = Instant::now();
        for (d, s) in dst.iter_mut().zip(&src) {
            d.copy_from_slice(std::hint::black_box(s));
        }
        std::hint::black_box(&dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (n * 36) as f64 / best / 1e9
}

/// One contiguous memcpy of the same byte count (glibc picks a faster strategy for one large
/// block than for three smaller ones; reported for transparency).
fn memcpy_block_gbps(bytes: usize, reps: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut best = f64::MAX;
    for _ in 0..reps + 1 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    bytes as f64 / best / 1e9
}

/// Best-of-reps bandwidth of publishing frames of `n` particles (3 vec3 fields), GB/s.
fn publish_gbps(n: u64, reps: usize) -> anyhow::Result<f64> {
    let name = format!("pshm-bench-{}-{n}", std::process::id());
    let p = Publisher::create(
        &name,
        Capacities::for_particles(n),
        CreateOptions::default(),
    )?;
    let data: Vec<Vec<[f32; 3]>> = (0..3).map(|k| vec![[k as f32; 3]; n as usize]).collect();
    let mut best = f64::MAX;
    // Warm-up pass touches every slot once (first touch of tmpfs pages is not publication).
    for rep in 0..reps + 3 {
        let t = Instant::now();
        let mut w = p.begin_frame(n)?;
        for (f, d) in FIELDS.into_iter().zip(&data) {
            w.write_vec3(f, d)?;
        }
        w.step = rep as u64;
        w.commit();
        if rep >= 3 {
            best = best.min(t.elapsed().as_secs_f64());
        }
    }
    p.close(SolverState::Finished, false)?;
    Ok((n * 36) as f64 / best / 1e9)
}

/// Median and p99 wake-up latency (µs) over `consumers` processes.
fn wake_latency(consumers: usize, frames: u64) -> anyhow::Result<(f64, f64)> {
    let name = format!("pshm-bench-{}-wake{consumers}", std::process::id());
    let p = Publisher::create(
        &name,
        Capacities::for_particles(1000),
        CreateOptions::default(),
    )?;
    p.set_state(SolverState::Running);
    let exe = std::env::current_exe()?;
    let mut kids = Vec::new();
    for _ in 0..consumers {
        let mut k = Proc::new(&exe)
            .args(["--child", &name, "--latency-frames", &frames.to_string()])
            .stdout(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(k.stdout.as_mut().expect("piped")).read_line(&mut line)?;
        kids.push(k);
    }
    std::thread::sleep(Duration::from_millis(100));
    for k in 0..frames + 20 {
        let mut w = p.begin_frame(1000)?;
        w.step = k;
        w.commit();
        // Space frames out so each wake-up is measured alone.
        std::thread::sleep(Duration::from_micros(2000));
    }
    p.close(SolverState::Finished, false)?;
    let mut lat = Vec::new();
    for k in kids {
        let out = k.wait_with_output()?;
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(ns) = l
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse::<f64>().ok())
            {
                lat.push(ns / 1e3);
            }
        }
    }
    anyhow::ensure!(!lat.is_empty(), "no latency samples");
    let med = median(&mut lat);
    Ok((med, percentile(&mut lat, 0.99)))
}

fn child(name: &str, frames: u64) -> anyhow::Result<()> {
    let c = Consumer::attach(name)?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut last = c.newest_seq();
    let mut out = String::new();
    for _ in 0..frames {
        match c.wait_newer(last, Duration::from_secs(10)) {
            WaitOutcome::Newer(seq) => {
                let woke = sys::monotonic_ns();
                if let Some(meta) = c.with_newest(|v| v.meta)? {
                    out.push_str(&format!(
                        "{} {}\n",
                        meta.seq,
                        woke.saturating_sub(meta.publish_mono_ns)
                    ));
                }
                last = seq;
            }
            _ => break,
        }
    }
    print!("{out}");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(name) = cli.child {
        return child(&name, cli.latency_frames);
    }
    let log = |s: &str| {
        if !cli.json {
            eprintln!("{s}");
        }
    };
    log("measuring memcpy and publication bandwidth (1 M and 10 M particles, 36 B each)...");
    let memcpy_1m = memcpy_gbps(1_000_000, 20);
    let memcpy_10m = memcpy_gbps(10_000_000, 5);
    let block_10m = memcpy_block_gbps(360_000_000, 5);
    let pub_1m = publish_gbps(1_000_000, 20)?;
    let pub_10m = publish_gbps(10_000_000, 5)?;
    let mut v = json!({
        "machine": format!("{} cores", std::thread::available_parallelism().map_or(0, |n| n.get())),
        "command": "target/release/shm-bench --out bench/results/shm.json",
        "memcpy_gbps": memcpy_10m,
        "memcpy_gbps_1m": memcpy_1m,
        "memcpy_gbps_10m": memcpy_10m,
        "memcpy_single_block_gbps_10m": block_10m,
        "publish_gbps_1m": pub_1m,
        "publish_gbps_10m": pub_10m,
        "publish_vs_memcpy_1m": pub_1m / memcpy_1m,
        "publish_vs_memcpy_10m": pub_10m / memcpy_10m,
    });
    for n in [1usize, 4, 16] {
        log(&format!(
            "measuring wake-up latency with {n} consumer process(es)..."
        ));
        let (med, p99) = wake_latency(n, cli.latency_frames)?;
        v[format!("wake_median_us_{n}")] = json!(med);
        v[format!("wake_p99_us_{n}")] = json!(p99);
    }
    if let Some(path) = &cli.out {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(&v)? + "\n")?;
    }
    if cli.json {
        println!("{v}");
    } else {
        println!("| measurement | value |\n|---|---:|");
        for (k, val) in v.as_object().expect("object") {
            match val.as_f64() {
                Some(x) => println!("| {k} | {x:.2} |"),
                None => println!("| {k} | {val} |"),
            }
        }
    }
    Ok(())
}
