//! `shmctl`: list, inspect, command and clean particle-shm segments.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use shm_protocol::segment::{self, SHM_DIR};
use shm_protocol::{Command, CommandOutcome, Consumer, Occupant};

#[derive(Parser)]
#[command(
    version,
    about = "Inspect and control particle-shm shared-memory segments",
    long_about = "Inspect and control particle-shm shared-memory segments.\n\n\
    A solver started with `solver --name-shm NAME` publishes into /dev/shm/NAME. \
    `shmctl list` shows every segment of ours, `shmctl info NAME` one of them, \
    `shmctl send NAME pause` steers the solver, and `shmctl clean` removes segments \
    whose solver died."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List particle-shm segments with owner pid, alive or stale, state, particles and newest frame.
    List {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one segment: solver state, step, simulated time, capacities, newest frame.
    Info {
        name: String,
        /// One JSON object (keys: name, state, pid, alive, step, sim_time, particles, frame_seq, ...).
        #[arg(long)]
        json: bool,
    },
    /// Send a command to the solver and print its acknowledgement.
    ///
    /// Commands: pause, resume, stop, update (publish now), checkpoint,
    /// refresh SECONDS (simulated), refresh-wall MILLISECONDS (0 = off).
    Send {
        name: String,
        /// The command and its value, e.g. `pause` or `refresh 0.01`. (A negative value reaches
        /// the command's own check, not clap's "unexpected argument".)
        #[arg(required = true, num_args = 1.., allow_negative_numbers = true)]
        command: Vec<String>,
        /// Seconds to wait for the acknowledgement.
        #[arg(long, default_value_t = 10.0)]
        timeout: f64,
    },
    /// Remove segments whose solver is gone (never touches live or foreign objects).
    Clean {
        /// Only say what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("shmctl: {}", shm_protocol::error_report(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::List { json } => list(json),
        Cmd::Info { name, json } => info(&name, json),
        Cmd::Send {
            name,
            command,
            timeout,
        } => send(&name, &command, timeout),
        Cmd::Clean { dry_run } => clean(dry_run),
    }
}

/// Names of objects in /dev/shm that carry our magic.
fn our_segments() -> Result<Vec<(String, Occupant)>> {
    let mut out = Vec::new();
    let dir = std::fs::read_dir(SHM_DIR).with_context(|| format!("cannot list {SHM_DIR}"))?;
    for entry in dir.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if segment::validate_name(&name).is_err() || !entry.path().is_file() {
            continue;
        }
        if let Ok(occ) = segment::occupant(&name) {
            if !matches!(occ, Occupant::Foreign(_)) {
                out.push((name, occ));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Everything `info` reports, as JSON.
fn describe(name: &str) -> Result<Value> {
    let c = Consumer::attach(name).with_context(|| format!("cannot attach to {name:?}"))?;
    let st = c.status();
    let caps = *c.capacities();
    let meta = c
        .with_newest(|v| v.meta)
        .with_context(|| format!("cannot read the newest frame of {name:?}"))?;
    let size = std::fs::metadata(Path::new(SHM_DIR).join(name))
        .map(|m| m.len())
        .unwrap_or(0);
    let stat = c.read_static().ok();
    Ok(json!({
        "name": name,
        "state": st.state_name(),
        "pid": st.owner_pid,
        "alive": st.alive,
        "heartbeat_age_s": st.heartbeat_age_s,
        "frame_seq": st.newest_seq,
        "step": meta.map(|m| m.step),
        "sim_time": meta.map(|m| m.sim_time),
        "dt": meta.map(|m| m.dt),
        "steps_per_s": meta.map(|m| m.steps_per_s),
        "frame_age_s": meta.map(|m| shm_protocol::sys::unix_ns().saturating_sub(m.wall_unix_ns) as f64 * 1e-9),
        "particles": meta.map(|m| m.particle_count).or(stat.as_ref().map(|s| s.particle_ids.len() as u64)),
        "species": stat.as_ref().map(|s| s.species.len()),
        "meshes": stat.as_ref().map(|s| s.meshes.iter().map(|m| m.name.clone()).collect::<Vec<_>>()),
        "world_min": stat.as_ref().map(|s| s.world_min),
        "world_max": stat.as_ref().map(|s| s.world_max),
        "size_bytes": size,
        "capacities": {
            "max_particles": caps.max_particles,
            "max_triangles": caps.max_triangles,
            "max_bodies": caps.max_bodies,
            "slot_count": caps.slot_count,
            "fields": caps.fields,
        },
        // The per-particle arrays each frame carries, by the segment's names (`fields` above is
        // their bit mask).
        "frame_fields": shm_protocol::FieldKind::ALL
            .iter()
            .filter(|f| caps.fields & f.bit() != 0)
            .map(|f| f.name())
            .collect::<Vec<_>>(),
    }))
}

fn list(as_json: bool) -> Result<ExitCode> {
    let segs = our_segments()?;
    let mut rows = Vec::new();
    for (name, occ) in &segs {
        let v = describe(name).unwrap_or_else(|e| {
            let pid = match occ {
                Occupant::Alive { pid } | Occupant::Stale { pid } => *pid,
                Occupant::Foreign(_) => 0,
            };
            json!({ "name": name, "pid": pid, "alive": matches!(occ, Occupant::Alive { .. }),
                    "state": "unreadable", "error": format!("{e:#}") })
        });
        rows.push(v);
    }
    if as_json {
        println!("{}", Value::Array(rows));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no particle-shm segments in {SHM_DIR}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<28} {:>8} {:<6} {:<10} {:>10} {:>10} {:>12} {:>9}",
        "NAME", "PID", "OWNER", "STATE", "PARTICLES", "FRAME", "SIM TIME", "SIZE MiB"
    );
    // JSON values print without padding: numbers become strings first ("-" where absent).
    let num = |v: &Value| v.as_u64().map_or("-".to_string(), |n| n.to_string());
    for r in rows {
        println!(
            "{:<28} {:>8} {:<6} {:<10} {:>10} {:>10} {:>12} {:>9.1}",
            r["name"].as_str().unwrap_or("?"),
            num(&r["pid"]),
            if r["alive"].as_bool() == Some(true) {
                "alive"
            } else {
                "stale"
            },
            r["state"].as_str().unwrap_or("?"),
            num(&r["particles"]),
            num(&r["frame_seq"]),
            r["sim_time"]
                .as_f64()
                .map_or("-".into(), |t| format!("{t:.4} s")),
            r["size_bytes"].as_u64().unwrap_or(0) as f64 / 1048576.0,
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn info(name: &str, as_json: bool) -> Result<ExitCode> {
    let v = describe(name)?;
    if as_json {
        println!("{v}");
    } else {
        let obj = v.as_object().context("internal: info is an object")?;
        for (k, val) in obj {
            println!("{k:>16}: {val}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn send(name: &str, words: &[String], timeout: f64) -> Result<ExitCode> {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let cmd = Command::parse(&words).map_err(anyhow::Error::msg)?;
    let timeout = shm_protocol::limits::wall_duration("--timeout", timeout, 0.001)
        .map_err(anyhow::Error::msg)?;
    let mut c = Consumer::attach(name).with_context(|| format!("cannot attach to {name:?}"))?;
    match c
        .send(&cmd, timeout)
        .with_context(|| format!("sending {cmd:?} to {name:?}"))?
    {
        CommandOutcome::Done(msg) => {
            println!("ok: {msg}");
            Ok(ExitCode::SUCCESS)
        }
        CommandOutcome::Rejected(msg) => {
            println!("rejected: {msg}");
            Ok(ExitCode::from(2))
        }
    }
}

fn clean(dry_run: bool) -> Result<ExitCode> {
    let mut removed = 0;
    for (name, occ) in our_segments()? {
        if let Occupant::Stale { pid } = occ {
            if dry_run {
                println!("would remove {name} (owner pid {pid} is gone)");
            } else {
                segment::unlink(&name).with_context(|| format!("removing {name}"))?;
                println!("removed {name} (owner pid {pid} was gone)");
            }
            removed += 1;
        }
    }
    if removed == 0 {
        println!("no stale segments");
    }
    Ok(ExitCode::SUCCESS)
}
