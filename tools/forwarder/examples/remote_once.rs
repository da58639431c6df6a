//! Prints the newest frame's step from a forwarder: `cargo run -p forwarder --example
//! remote_once -- 127.0.0.1:7788 [TOKEN]`.

use forwarder::{ConnectOptions, RemoteSource};
use shm_protocol::FrameSource;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7788".into());
    let opts = ConnectOptions {
        token: args.next(),
        ..ConnectOptions::default()
    };
    let mut src = RemoteSource::connect_with(&addr, opts)?;
    let status = src.status()?;
    match src.read_newest()? {
        Some(f) => println!(
            "{}: state {}, frame {} step {} t = {} s, {} particles",
            src.describe(),
            status.state_name(),
            f.meta.seq,
            f.meta.step,
            f.meta.sim_time,
            f.meta.particle_count
        ),
        None => println!(
            "{}: state {}, no frame yet",
            src.describe(),
            status.state_name()
        ),
    }
    Ok(())
}
