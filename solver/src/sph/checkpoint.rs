//! Checkpoints of SPH runs: the case text and the full state (positions, velocities, densities,
//! the step about to be taken), bincode 2. A restart continues bit for bit.

use super::cpu::{SphSim, SphState};
use super::motion::MovingSolids;
use super::setup::{SphCase, SphConstants};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// First bytes of an SPH checkpoint (DEM checkpoints start with `PSHMCKPT`).
pub const MAGIC: [u8; 8] = *b"PSHMSPHC";
pub const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Payload {
    magic: [u8; 8],
    version: u32,
    case_toml: String,
    dt: f64,
    state: SphState,
}

/// Why an SPH checkpoint could not be written or read; names the file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SphCheckpointError {
    pub path: String,
    pub message: String,
}

fn err(path: &Path, message: impl Into<String>) -> SphCheckpointError {
    SphCheckpointError {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Whether the file at `path` starts like an SPH checkpoint.
pub fn is_sph_checkpoint(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == MAGIC
}

/// Writes `sim` (atomically: `path.tmp`, then renamed).
pub fn save(path: &Path, case_toml: &str, sim: &SphSim) -> Result<(), SphCheckpointError> {
    save_state(path, case_toml, sim.s.clone(), sim.dt())
}

/// Writes `state`, about to take the step `dt`, whatever backend ran it (the same file).
pub fn save_state(
    path: &Path,
    case_toml: &str,
    state: SphState,
    dt: f64,
) -> Result<(), SphCheckpointError> {
    let p = Payload {
        magic: MAGIC,
        version: VERSION,
        case_toml: case_toml.to_string(),
        dt,
        state,
    };
    let bytes = bincode::serde::encode_to_vec(&p, bincode::config::standard())
        .map_err(|e| err(path, format!("cannot encode checkpoint: {e}")))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| err(&tmp, format!("cannot write checkpoint: {e}")))?;
    std::fs::rename(&tmp, path).map_err(|e| err(path, format!("cannot write checkpoint: {e}")))
}

/// Reads a checkpoint: the case (text and parsed) and the simulation ready to continue.
pub fn load(path: &Path) -> Result<(String, SphCase, SphSim), SphCheckpointError> {
    let r = load_state(path)?;
    let moving = r.moving_solids(path)?;
    Ok((
        r.case_toml,
        r.case,
        SphSim::from_state_moving(r.constants, r.state, r.dt, moving),
    ))
}

impl Restored {
    /// The case's moving solids (placed from its rest positions; none without).
    pub fn moving_solids(&self, path: &Path) -> Result<MovingSolids, SphCheckpointError> {
        if !self.case.has_moving_solids() {
            return Ok(MovingSolids::default());
        }
        let p = self.case.particles(&self.constants).map_err(|e| {
            err(
                path,
                format!("holds a case whose solids cannot be placed: {e}"),
            )
        })?;
        if p.pos.len() != self.state.pos.len() {
            return Err(err(
                path,
                format!(
                    "holds {} particles, but its case places {}",
                    self.state.pos.len(),
                    p.pos.len()
                ),
            ));
        }
        Ok(p.moving)
    }
}

/// A checkpoint as read: what any backend needs to continue it.
pub struct Restored {
    pub case_toml: String,
    pub case: SphCase,
    pub constants: SphConstants,
    pub state: SphState,
    /// The step the run was about to take [s].
    pub dt: f64,
}

/// Reads and checks a checkpoint.
pub fn load_state(path: &Path) -> Result<Restored, SphCheckpointError> {
    let bytes =
        std::fs::read(path).map_err(|e| err(path, format!("cannot read checkpoint: {e}")))?;
    let (p, _): (Payload, usize) =
        bincode::serde::decode_from_slice(&bytes, bincode::config::standard())
            .map_err(|e| err(path, format!("corrupt SPH checkpoint: {e}")))?;
    if p.magic != MAGIC {
        return Err(err(path, "not an SPH checkpoint (bad magic)"));
    }
    if p.version != VERSION {
        return Err(err(
            path,
            format!(
                "SPH checkpoint version {}, this build reads {VERSION}",
                p.version
            ),
        ));
    }
    let case = SphCase::from_toml_str(&p.case_toml)
        .map_err(|e| err(path, format!("holds an invalid case: {e}")))?;
    let c = case
        .constants()
        .map_err(|e| err(path, format!("holds an invalid case: {e}")))?;
    let n = p.state.pos.len();
    if p.state.vel.len() != n || p.state.rho.len() != n || p.state.kind.len() != n {
        return Err(err(
            path,
            "corrupt SPH checkpoint: arrays of different lengths",
        ));
    }
    if !(p.dt > 0.0 && p.dt.is_finite()) {
        return Err(err(path, format!("corrupt SPH checkpoint: step {}", p.dt)));
    }
    Ok(Restored {
        case_toml: p.case_toml,
        case,
        constants: c,
        state: p.state,
        dt: p.dt,
    })
}
