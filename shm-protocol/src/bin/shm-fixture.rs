//! `shm-fixture`: small real processes for the protocol's multi-process tests and benchmark
//! (a writer publishing a checksummed pattern, readers verifying it, a client that dies holding
//! the command mutex, a waiter that dies asleep). Not a user tool.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use shm_protocol::*;

#[derive(Parser)]
#[command(about = "test processes for shm-protocol (not a user tool)")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Create NAME and publish checksummed frames; answer every command with Done.
    Writer {
        name: String,
        #[arg(long, default_value_t = 1024)]
        particles: u64,
        /// Frames to publish (0: until killed).
        #[arg(long, default_value_t = 0)]
        frames: u64,
        /// Pause between frames, microseconds.
        #[arg(long, default_value_t = 0)]
        interval_us: u64,
        /// Leave the segment behind at the end.
        #[arg(long)]
        keep: bool,
    },
    /// Attach to NAME and verify every frame seen until the writer finishes; prints JSON.
    Reader {
        name: String,
        /// Also verify through zero-copy views.
        #[arg(long)]
        views: bool,
    },
    /// Attach, take the command mutex and sleep (to be SIGKILLed holding it).
    HoldLock { name: String },
    /// Attach and sleep waiting for a frame that never comes (to be SIGKILLed asleep).
    Wait { name: String },
    /// At CLOCK_MONOTONIC `at_ns`, take over NAME (as `solver --load-shm` does); print `won`
    /// and hold it until killed, or `lost: MESSAGE` and exit.
    TakeOver {
        name: String,
        #[arg(long)]
        at_ns: u64,
    },
    /// Try to attach to NAME, then to create it; print each outcome on a line.
    Probe { name: String },
    /// Wait for frames and print `seq publish_to_wake_ns` per wake-up (latency benchmark).
    Latency { name: String, frames: u64 },
}

/// Pattern value of particle `i` in frame `step`, component `c` (bits, so NaNs compare).
pub fn pattern(step: u64, i: u64, c: u64) -> f32 {
    let mut x = step
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        .wrapping_add(c);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    f32::from_bits(x as u32)
}

fn fill(w: &mut FrameWriter<'_>, step: u64) -> Result<(), PublishError> {
    for field in [FieldKind::Position, FieldKind::Velocity] {
        let off = field as u64 * 3;
        for (i, p) in w.vec3_mut(field)?.iter_mut().enumerate() {
            *p = [0, 1, 2].map(|c| pattern(step, i as u64, off + c));
        }
    }
    Ok(())
}

fn verify(step: u64, pos: &[[f32; 3]], vel: &[[f32; 3]]) -> bool {
    pos.iter().zip(vel).enumerate().all(|(i, (p, v))| {
        (0..3).all(|c| {
            p[c].to_bits() == pattern(step, i as u64, c as u64).to_bits()
                && v[c].to_bits() == pattern(step, i as u64, 3 + c as u64).to_bits()
        })
    })
}

fn attach_retry(name: &str) -> Consumer {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match Consumer::attach(name) {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => {
                eprintln!("shm-fixture: cannot attach {name}: {e}");
                std::process::exit(3);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn writer(name: &str, particles: u64, frames: u64, interval_us: u64, keep: bool) {
    let mut caps = Capacities::for_particles(particles);
    caps.max_bodies = 1;
    let p = match Publisher::create(name, caps, CreateOptions::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("shm-fixture: {e}");
            std::process::exit(3);
        }
    };
    p.set_state(SolverState::Running);
    let mut k = 0u64;
    loop {
        k += 1;
        let mut w = p.begin_frame(particles).expect("within capacity");
        w.step = k * 7;
        w.sim_time = k as f64 * 1e-3;
        w.dt = 1e-5;
        fill(&mut w, k * 7).expect("fields reserved");
        w.set_bodies(&[BodyTransform::IDENTITY]).expect("one body");
        w.commit();
        p.heartbeat();
        for c in p.poll_commands() {
            p.acknowledge(&c, &CommandOutcome::Done(format!("{:?}", c.command)));
        }
        if frames != 0 && k >= frames {
            break;
        }
        if interval_us > 0 {
            std::thread::sleep(Duration::from_micros(interval_us));
        }
    }
    p.close(SolverState::Finished, keep).expect("unlink");
}

fn reader(name: &str, views: bool) {
    let c = attach_retry(name);
    let (mut seen, mut bad, mut contended, mut view_checks) = (0u64, 0u64, 0u64, 0u64);
    let mut last = 0u64;
    while let WaitOutcome::Newer(_) = c.wait_newer(last, Duration::from_secs(5)) {
        match c.read_newest() {
            Ok(Some(f)) => {
                let ok = f.meta.step == f.meta.seq * 7
                    && f.bodies == [BodyTransform::IDENTITY]
                    && verify(
                        f.meta.step,
                        f.positions.as_deref().unwrap_or(&[]),
                        f.velocities.as_deref().unwrap_or(&[]),
                    );
                if !ok {
                    bad += 1;
                }
                seen += 1;
                last = f.meta.seq;
            }
            Ok(None) => {}
            Err(ReadError::Contended(_)) => contended += 1,
            Err(e) => {
                eprintln!("shm-fixture reader: {e}");
                bad += 1;
            }
        }
        if views {
            match c.with_newest(|v| {
                verify(
                    v.meta.step,
                    v.positions().unwrap_or(&[]),
                    v.velocities().unwrap_or(&[]),
                )
            }) {
                Ok(Some(true)) => view_checks += 1,
                Ok(Some(false)) => bad += 1,
                Ok(None) | Err(ReadError::Contended(_)) => {}
                Err(_) => bad += 1,
            }
        }
        if c.status().state == Some(SolverState::Finished) && c.newest_seq() == last {
            break;
        }
    }
    println!(
        "{{\"seen\":{seen},\"bad\":{bad},\"contended\":{contended},\"view_checks\":{view_checks},\"last\":{last}}}"
    );
}

fn main() {
    match Cli::parse().mode {
        Mode::Writer {
            name,
            particles,
            frames,
            interval_us,
            keep,
        } => writer(&name, particles, frames, interval_us, keep),
        Mode::Reader { name, views } => reader(&name, views),
        Mode::HoldLock { name } => {
            let c = attach_retry(&name);
            let m = c.region();
            // Reach the mutex through a command submission's path: take it and never release.
            let locked = shm_protocol::segment::lock_command_mutex_for_test(m);
            println!("locked {locked}");
            std::io::stdout().flush().ok();
            std::thread::sleep(Duration::from_secs(3600));
        }
        Mode::TakeOver { name, at_ns } => {
            while sys::monotonic_ns() < at_ns {
                std::hint::spin_loop();
            }
            match Publisher::take_over(&name) {
                Ok(p) => {
                    println!("won");
                    std::io::stdout().flush().ok();
                    std::thread::sleep(Duration::from_secs(3600));
                    drop(p);
                }
                Err(e) => println!("lost: {e}"),
            }
        }
        Mode::Probe { name } => {
            match Consumer::attach(&name) {
                Ok(_) => println!("attach: ok"),
                Err(e) => println!("attach: {e}"),
            }
            match Publisher::create(
                &name,
                Capacities::for_particles(4),
                CreateOptions::default(),
            ) {
                Ok(_) => println!("create: ok"),
                Err(e) => println!("create: {e}"),
            }
        }
        Mode::Wait { name } => {
            let c = attach_retry(&name);
            println!("waiting");
            std::io::stdout().flush().ok();
            let _ = c.wait_newer(u64::MAX - 1, Duration::from_secs(3600));
        }
        Mode::Latency { name, frames } => {
            let c = attach_retry(&name);
            println!("ready");
            std::io::stdout().flush().ok();
            let mut last = c.newest_seq();
            let mut out = String::new();
            for _ in 0..frames {
                match c.wait_newer(last, Duration::from_secs(10)) {
                    WaitOutcome::Newer(seq) => {
                        let woke = sys::monotonic_ns();
                        if let Ok(Some(meta)) = c.with_newest(|v| v.meta) {
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
        }
    }
}
