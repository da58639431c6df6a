//! `forwarder-page-serve`: a fake solver publishing N particles (positions only, republished
//! at `--publish-hz`) and the forwarder serving it, for measuring the browser page
//! (`bench/page_fps.mjs`). Prints `listening on ADDR` and runs until stdin closes.
//!
//! `forwarder-page-serve --particles 1000000 [--publish-hz 60]` (needs `forwarder` next to it)

use std::io::Read;

use anyhow::Context;
use clap::Parser;
use forwarder::testing::{unique_name, FakeSolver, ForwarderProcess, SolverOptions};
use shm_protocol::FieldKind;

#[derive(Parser, Debug)]
struct Args {
    /// Particles of the fake solver (1 to 20,000,000).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(1..=20_000_000))]
    particles: u32,
    /// Rate the fake solver publishes at [Hz] (1 to 1000).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=1000))]
    publish_hz: u32,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let exe = std::env::current_exe()
        .context("own path")?
        .with_file_name("forwarder");
    anyhow::ensure!(
        exe.exists(),
        "{} not found: build the forwarder first",
        exe.display()
    );
    let name = unique_name("page");
    let solver = FakeSolver::start(
        &name,
        SolverOptions {
            particles: args.particles as usize,
            fields: FieldKind::Position.bit(),
            interval: std::time::Duration::from_secs_f64(1.0 / f64::from(args.publish_hz)),
            reuse_positions: true,
        },
    );
    let fw = ForwarderProcess::start(&exe, &name, &[]);
    println!("listening on {}", fw.addr);
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(fw);
    solver.stop();
    Ok(())
}
