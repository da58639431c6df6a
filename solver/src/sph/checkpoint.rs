//! Checkpoints of SPH runs: the case text and the full state (positions, velocities, densities,
//! the step about to be taken, and a Verlet run's state one step back), bincode 2. A restart
//! continues bit for bit. Version 1 (before the Verlet integrator) is still read.

use super::cpu::{SphSim, SphState};
use super::motion::MovingSolids;
use super::setup::{SphCase, SphConstants};
use crate::core::vec3::V3;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// First bytes of an SPH checkpoint (DEM checkpoints start with `PSHMCKPT`).
pub const MAGIC: [u8; 8] = *b"PSHMSPHC";
pub const VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Payload {
    magic: [u8; 8],
    version: u32,
    case_toml: String,
    dt: f64,
    state: SphState,
}

/// The first fields of every version.
#[derive(Deserialize)]
struct Head {
    magic: [u8; 8],
    version: u32,
}

/// Version 1: the state without `prev`.
#[derive(Deserialize)]
struct PayloadV1 {
    _magic: [u8; 8],
    _version: u32,
    case_toml: String,
    dt: f64,
    state: StateV1,
}

#[derive(Deserialize)]
struct StateV1 {
    time: f64,
    step: u64,
    kind: Vec<u32>,
    pos: Vec<V3>,
    vel: Vec<V3>,
    rho: Vec<f64>,
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
    let corrupt =
        |e: bincode::error::DecodeError| err(path, format!("corrupt SPH checkpoint: {e}"));
    let cfg = bincode::config::standard();
    let (head, _): (Head, usize) =
        bincode::serde::decode_from_slice(&bytes, cfg).map_err(corrupt)?;
    if head.magic != MAGIC {
        return Err(err(path, "not an SPH checkpoint (bad magic)"));
    }
    let p = match head.version {
        VERSION => {
            bincode::serde::decode_from_slice::<Payload, _>(&bytes, cfg)
                .map_err(corrupt)?
                .0
        }
        1 => {
            let (v1, _): (PayloadV1, usize) =
                bincode::serde::decode_from_slice(&bytes, cfg).map_err(corrupt)?;
            let s = v1.state;
            Payload {
                magic: MAGIC,
                version: 1,
                case_toml: v1.case_toml,
                dt: v1.dt,
                state: SphState {
                    time: s.time,
                    step: s.step,
                    kind: s.kind,
                    pos: s.pos,
                    vel: s.vel,
                    rho: s.rho,
                    prev: None,
                },
            }
        }
        v => {
            return Err(err(
                path,
                format!("SPH checkpoint version {v}, this build reads 1 and {VERSION}"),
            ))
        }
    };
    let case = SphCase::from_toml_str(&p.case_toml)
        .map_err(|e| err(path, format!("holds an invalid case: {e}")))?;
    let c = case
        .constants()
        .map_err(|e| err(path, format!("holds an invalid case: {e}")))?;
    let n = p.state.pos.len();
    let prev_ok = p
        .state
        .prev
        .as_ref()
        .is_none_or(|b| b.vel.len() == n && b.rho.len() == n);
    if p.state.vel.len() != n || p.state.rho.len() != n || p.state.kind.len() != n || !prev_ok {
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
