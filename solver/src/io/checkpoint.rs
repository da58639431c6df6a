//! Checkpoint/restart: the case (as TOML), the mesh triangles and the full state including
//! contact history, encoded with bincode 2 (serde, standard config). Restarting continues
//! bit-for-bit.

use crate::case::{Case, CaseError};
use crate::core::geometry::Mesh;
use crate::core::stl::Triangle;
use crate::decomp::DecompositionOverride;
use crate::dem::state::{self, HistEntry, SimState, HISTORY_CAP};
use crate::exec::sim::{BackendKind, Simulation};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const MAGIC: [u8; 8] = *b"PSHMCKPT";
/// Bumped whenever the encoded layout changes. Version 2 stored particle ids with the state
/// (version 1 implied 0..n); version 3 stores history partners as the workers do
/// (`state::wall_partner`, ...) with the history's capacity; version 4 adds the particle flow
/// (removed count and mass, next id, per-inflow counts). Versions 1 to 3 are still read.
pub const CHECKPOINT_VERSION: u32 = 4;

#[derive(Serialize, Deserialize)]
struct Header {
    magic: [u8; 8],
    version: u32,
}

/// A history slot of versions 1 and 2: a 64-bit key, kind in the top two bits (0 particle id,
/// 1 box wall, 2 mesh triangle as `mesh << 32 | triangle of the mesh`), `u64::MAX` unused.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct HistEntryV2 {
    key: u64,
    xi: crate::core::vec3::V3,
}

/// The partner of a version-2 key (`mesh_first`: first global triangle of each mesh, then the
/// total); `None` for an unused slot or a triangle the meshes do not have.
fn partner_of_v2_key(key: u64, mesh_first: &[u32]) -> Option<u32> {
    const KIND: u64 = 3 << 62;
    match key & KIND {
        _ if key == u64::MAX => None,
        0 => u32::try_from(key).ok(),
        k if k == 1 << 62 => Some(state::wall_partner((key & 0xFF) as u32)),
        _ => {
            let mesh = ((key >> 32) & 0x3FFF_FFFF) as usize;
            let (&first, &next) = (mesh_first.get(mesh)?, mesh_first.get(mesh + 1)?);
            let tri = key as u32;
            (tri < next - first).then(|| state::triangle_partner(first + tri))
        }
    }
}

/// A version-1 state: [`SimState`] with 64-bit history keys and no ids (they were 0..n).
#[derive(Deserialize)]
struct SimStateV1 {
    time: f64,
    step: u64,
    species: Vec<u32>,
    pos: Vec<crate::core::vec3::V3>,
    vel: Vec<crate::core::vec3::V3>,
    omega: Vec<crate::core::vec3::V3>,
    force: Vec<crate::core::vec3::V3>,
    torque: Vec<crate::core::vec3::V3>,
    forces_valid: bool,
    contacts: Vec<u32>,
    history: Vec<HistEntryV2>,
    history_overflows: u64,
}

#[derive(Deserialize)]
struct PayloadV1 {
    case_toml: String,
    case_name: String,
    base_dir: PathBuf,
    mesh_triangles: Vec<Vec<Triangle>>,
    state: SimStateV1,
}

/// Version 2: the version-1 state with ids first.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct PayloadV2 {
    case_toml: String,
    case_name: String,
    base_dir: PathBuf,
    mesh_triangles: Vec<Vec<Triangle>>,
    state: SimStateV2,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct SimStateV2 {
    time: f64,
    step: u64,
    id: Vec<u32>,
    species: Vec<u32>,
    pos: Vec<crate::core::vec3::V3>,
    vel: Vec<crate::core::vec3::V3>,
    omega: Vec<crate::core::vec3::V3>,
    force: Vec<crate::core::vec3::V3>,
    torque: Vec<crate::core::vec3::V3>,
    forces_valid: bool,
    contacts: Vec<u32>,
    history: Vec<HistEntryV2>,
    history_overflows: u64,
}

impl From<PayloadV1> for PayloadV2 {
    fn from(p: PayloadV1) -> PayloadV2 {
        let s = p.state;
        PayloadV2 {
            case_toml: p.case_toml,
            case_name: p.case_name,
            base_dir: p.base_dir,
            mesh_triangles: p.mesh_triangles,
            state: SimStateV2 {
                time: s.time,
                step: s.step,
                id: (0..s.pos.len() as u32).collect(),
                species: s.species,
                pos: s.pos,
                vel: s.vel,
                omega: s.omega,
                force: s.force,
                torque: s.torque,
                forces_valid: s.forces_valid,
                contacts: s.contacts,
                history: s.history,
                history_overflows: s.history_overflows,
            },
        }
    }
}

impl From<PayloadV2> for PayloadV3 {
    fn from(p: PayloadV2) -> PayloadV3 {
        let s = p.state;
        let mut mesh_first = vec![0u32];
        for m in &p.mesh_triangles {
            mesh_first.push(mesh_first[mesh_first.len() - 1] + m.len() as u32);
        }
        // Versions 1 and 2 kept HISTORY_CAP slots per particle, used ones first.
        let history = s
            .history
            .iter()
            .map(|h| match partner_of_v2_key(h.key, &mesh_first) {
                Some(partner) => HistEntry { partner, xi: h.xi },
                None => HistEntry::NONE,
            })
            .collect();
        PayloadV3 {
            case_toml: p.case_toml,
            case_name: p.case_name,
            base_dir: p.base_dir,
            mesh_triangles: p.mesh_triangles,
            state: SimStateV3 {
                time: s.time,
                step: s.step,
                id: s.id,
                species: s.species,
                pos: s.pos,
                vel: s.vel,
                omega: s.omega,
                force: s.force,
                torque: s.torque,
                forces_valid: s.forces_valid,
                contacts: s.contacts,
                history,
                history_cap: HISTORY_CAP,
                history_overflows: s.history_overflows,
            },
        }
    }
}

/// Version 3: the current state without the particle flow.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct PayloadV3 {
    case_toml: String,
    case_name: String,
    base_dir: PathBuf,
    mesh_triangles: Vec<Vec<Triangle>>,
    state: SimStateV3,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct SimStateV3 {
    time: f64,
    step: u64,
    id: Vec<u32>,
    species: Vec<u32>,
    pos: Vec<crate::core::vec3::V3>,
    vel: Vec<crate::core::vec3::V3>,
    omega: Vec<crate::core::vec3::V3>,
    force: Vec<crate::core::vec3::V3>,
    torque: Vec<crate::core::vec3::V3>,
    forces_valid: bool,
    contacts: Vec<u32>,
    history: Vec<HistEntry>,
    history_cap: usize,
    history_overflows: u64,
}

impl From<PayloadV3> for Payload {
    fn from(p: PayloadV3) -> Payload {
        let s = p.state;
        // Before version 4 nothing was removed or added: the next id follows the largest.
        let next_id = s.id.last().map_or(0, |&id| id + 1);
        Payload {
            case_toml: p.case_toml,
            case_name: p.case_name,
            base_dir: p.base_dir,
            mesh_triangles: p.mesh_triangles,
            state: SimState {
                time: s.time,
                step: s.step,
                id: s.id,
                species: s.species,
                pos: s.pos,
                vel: s.vel,
                omega: s.omega,
                force: s.force,
                torque: s.torque,
                forces_valid: s.forces_valid,
                contacts: s.contacts,
                history: s.history,
                history_cap: s.history_cap,
                history_overflows: s.history_overflows,
                flow: state::ParticleFlow {
                    next_id,
                    ..Default::default()
                },
            },
        }
    }
}

/// The payload after the header. Meshes are stored as triangles only: their names and motion come
/// from the case (bincode cannot decode the case's internally tagged enums, so the case is TOML).
#[derive(Serialize, Deserialize)]
struct Payload {
    case_toml: String,
    case_name: String,
    base_dir: PathBuf,
    mesh_triangles: Vec<Vec<Triangle>>,
    state: SimState,
}

/// [`Payload`] borrowed, for writing (serde encodes `&T` as `T`).
#[derive(Serialize)]
struct PayloadRef<'a> {
    case_toml: String,
    case_name: &'a str,
    base_dir: &'a Path,
    mesh_triangles: Vec<&'a [Triangle]>,
    state: &'a SimState,
}

/// The bytes of a checkpoint of `state` in `case` with `meshes` (`label` names it in errors).
/// Also what rank 0 of a run over several processes sends the other ranks at the start.
pub fn encode_parts(
    case: &Case,
    meshes: &[Mesh],
    state: &SimState,
    label: &Path,
) -> Result<Vec<u8>, CheckpointError> {
    let enc = |message: String| CheckpointError::Encode {
        path: label.to_path_buf(),
        message,
    };
    let payload = PayloadRef {
        case_toml: case.to_toml().map_err(|e| enc(e.to_string()))?,
        case_name: &case.origin.name,
        base_dir: &case.origin.base_dir,
        mesh_triangles: meshes.iter().map(|m| m.triangles.as_slice()).collect(),
        state,
    };
    let cfg = bincode::config::standard();
    let mut bytes = bincode::serde::encode_to_vec(
        Header {
            magic: MAGIC,
            version: CHECKPOINT_VERSION,
        },
        cfg,
    )
    .map_err(|e| enc(e.to_string()))?;
    bytes.extend(bincode::serde::encode_to_vec(&payload, cfg).map_err(|e| enc(e.to_string()))?);
    Ok(bytes)
}

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: cannot write checkpoint: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot read checkpoint: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a particle-shm checkpoint (bad magic)")]
    BadMagic { path: PathBuf },
    #[error(
        "{path}: checkpoint version {found}, this build reads versions 1 to {CHECKPOINT_VERSION}"
    )]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: cannot encode checkpoint: {message}")]
    Encode { path: PathBuf, message: String },
    #[error("{path}: corrupt checkpoint: {message}")]
    Decode { path: PathBuf, message: String },
    #[error("{path}: cannot read the state from the backend: {source}")]
    State {
        path: PathBuf,
        #[source]
        source: crate::exec::worker::StepError,
    },
    #[error("{path}: cannot start the backend for this checkpoint: {source}")]
    Backend {
        path: PathBuf,
        #[source]
        source: Box<crate::exec::sim::SimError>,
    },
    #[error("{path}: checkpoint holds an invalid case: {source}")]
    Case {
        path: PathBuf,
        #[source]
        source: Box<CaseError>,
    },
}

impl Simulation {
    /// Writes a checkpoint (atomically: to `path.tmp`, then renamed). Collective in a run
    /// over several processes (the state is gathered on rank 0, which writes it).
    pub fn save_checkpoint(&self, path: &Path) -> Result<(), CheckpointError> {
        let state = self.state().map_err(|source| CheckpointError::State {
            path: path.to_path_buf(),
            source,
        })?;
        self.write_checkpoint(path, &state)
    }

    /// Writes `state` (this simulation's, from [`Simulation::state`]) as a checkpoint.
    pub fn write_checkpoint(&self, path: &Path, state: &SimState) -> Result<(), CheckpointError> {
        let bytes = encode_parts(self.case(), self.meshes(), state, path)?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &bytes).map_err(|source| CheckpointError::Write {
            path: tmp.clone(),
            source,
        })?;
        std::fs::rename(&tmp, path).map_err(|source| CheckpointError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Restores a simulation from a checkpoint on the CPU; stepping it continues bit-for-bit.
    pub fn load_checkpoint(path: &Path) -> Result<Simulation, CheckpointError> {
        Self::load_checkpoint_on(path, &BackendKind::Cpu)
    }

    /// [`Simulation::load_checkpoint`] on the chosen backend (bit-for-bit continuation holds
    /// on the backend that wrote the checkpoint).
    pub fn load_checkpoint_on(
        path: &Path,
        kind: &BackendKind,
    ) -> Result<Simulation, CheckpointError> {
        Self::load_checkpoint_with(path, kind, DecompositionOverride::default())
    }

    /// [`Simulation::load_checkpoint_on`] with the checkpointed run's decomposition changed by
    /// `decomposition`. Results do not depend on it: a run checkpointed on 3 sub-domains
    /// continues bit-for-bit on 1 or 4.
    pub fn load_checkpoint_with(
        path: &Path,
        kind: &BackendKind,
        decomposition: DecompositionOverride,
    ) -> Result<Simulation, CheckpointError> {
        let bytes = std::fs::read(path).map_err(|source| CheckpointError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let (mut case, meshes, state) = decode_parts(&bytes, path)?;
        case.decomposition = decomposition.apply(case.decomposition);
        Simulation::assemble(case, meshes, state, Vec::new(), kind).map_err(|source| {
            CheckpointError::Backend {
                path: path.to_path_buf(),
                source: Box::new(source),
            }
        })
    }
}

/// Decodes checkpoint bytes (any version this build reads) into the case, its meshes and the
/// state (`path` names them in errors).
pub fn decode_parts(
    bytes: &[u8],
    path: &Path,
) -> Result<(Case, Vec<Mesh>, SimState), CheckpointError> {
    let cfg = bincode::config::standard();
    let dec = |e: bincode::error::DecodeError| CheckpointError::Decode {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let (header, used): (Header, usize) =
        bincode::serde::decode_from_slice(bytes, cfg).map_err(|_| CheckpointError::BadMagic {
            path: path.to_path_buf(),
        })?;
    if header.magic != MAGIC {
        return Err(CheckpointError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    let p: Payload = match header.version {
        1 => PayloadV3::from(PayloadV2::from(
            bincode::serde::decode_from_slice::<PayloadV1, _>(&bytes[used..], cfg)
                .map_err(dec)?
                .0,
        ))
        .into(),
        2 => PayloadV3::from(
            bincode::serde::decode_from_slice::<PayloadV2, _>(&bytes[used..], cfg)
                .map_err(dec)?
                .0,
        )
        .into(),
        3 => bincode::serde::decode_from_slice::<PayloadV3, _>(&bytes[used..], cfg)
            .map_err(dec)?
            .0
            .into(),
        CHECKPOINT_VERSION => {
            bincode::serde::decode_from_slice(&bytes[used..], cfg)
                .map_err(dec)?
                .0
        }
        found => {
            return Err(CheckpointError::Version {
                path: path.to_path_buf(),
                found,
            })
        }
    };
    let case = Case::from_toml_str(&p.case_toml, &p.case_name, &p.base_dir).map_err(|source| {
        CheckpointError::Case {
            path: path.to_path_buf(),
            source: Box::new(source),
        }
    })?;
    case.validate_fields()
        .map_err(|source| CheckpointError::Case {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
    if p.mesh_triangles.len() != case.meshes.len() {
        let message = format!(
            "{} mesh triangle sets for {} meshes",
            p.mesh_triangles.len(),
            case.meshes.len()
        );
        return Err(CheckpointError::Decode {
            path: path.to_path_buf(),
            message,
        });
    }
    // Species are checked against the case where every state is (Simulation::assemble).
    if let Some(message) = p.state.inconsistency() {
        return Err(CheckpointError::Decode {
            path: path.to_path_buf(),
            message,
        });
    }
    let meshes = case
        .meshes
        .iter()
        .zip(p.mesh_triangles)
        .enumerate()
        .map(|(k, (spec, triangles))| Mesh {
            name: spec.name.clone(),
            triangles,
            motion: spec.motion.clone(),
            material: k + 1,
        })
        .collect();
    Ok((case, meshes, p.state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dem::state::{MESH_PARTNER_BASE, PARTNER_NONE};

    #[test]
    fn version_2_keys_become_partners() {
        // Two meshes of 10 and 5 triangles.
        let first = [0, 10, 15];
        assert_eq!(partner_of_v2_key(7, &first), Some(7));
        assert_eq!(partner_of_v2_key(u64::MAX, &first), None);
        assert_eq!(
            partner_of_v2_key(1 << 62 | 3, &first),
            Some(state::wall_partner(3))
        );
        let tri = |mesh: u64, t: u64| 2 << 62 | mesh << 32 | t;
        assert_eq!(
            partner_of_v2_key(tri(0, 9), &first),
            Some(MESH_PARTNER_BASE + 9)
        );
        assert_eq!(
            partner_of_v2_key(tri(1, 4), &first),
            Some(MESH_PARTNER_BASE + 14)
        );
        // A triangle the meshes do not have is dropped, not aliased onto another.
        assert_eq!(partner_of_v2_key(tri(1, 5), &first), None);
        assert_eq!(partner_of_v2_key(tri(2, 0), &first), None);
    }

    /// The inverse of `partner_of_v2_key` for particles and walls (what a version-2 writer
    /// stored).
    fn v2_key(partner: u32) -> u64 {
        if partner == PARTNER_NONE {
            u64::MAX
        } else if partner >= state::WALL_PARTNER_BASE {
            1 << 62 | (partner - state::WALL_PARTNER_BASE) as u64
        } else {
            partner as u64
        }
    }

    /// A version-2 file of a frictional run (particle and wall springs) loads with the same
    /// history and continues exactly as the run it was taken from.
    #[test]
    fn a_version_2_checkpoint_continues_the_run() {
        // dt 1e-4 s: the particles have landed after 1,500 steps.
        let case = Case::falling_box(300, 1e-4);
        let mut sim = Simulation::new(case.clone()).expect("case");
        sim.step_n(1500).expect("steps");
        let s = sim.state().expect("state");
        assert!(
            s.history
                .iter()
                .any(|h| h.partner >= state::WALL_PARTNER_BASE && h.partner != PARTNER_NONE)
                && s.history
                    .iter()
                    .any(|h| state::is_particle_partner(h.partner)),
            "the run must have wall and particle springs to convert"
        );
        let payload = PayloadV2 {
            case_toml: case.to_toml().expect("toml"),
            case_name: case.origin.name.clone(),
            base_dir: case.origin.base_dir.clone(),
            mesh_triangles: Vec::new(),
            state: SimStateV2 {
                time: s.time,
                step: s.step,
                id: s.id.clone(),
                species: s.species.clone(),
                pos: s.pos.clone(),
                vel: s.vel.clone(),
                omega: s.omega.clone(),
                force: s.force.clone(),
                torque: s.torque.clone(),
                forces_valid: s.forces_valid,
                contacts: s.contacts.clone(),
                history: s
                    .history
                    .iter()
                    .map(|h| HistEntryV2 {
                        key: v2_key(h.partner),
                        xi: h.xi,
                    })
                    .collect(),
                history_overflows: s.history_overflows,
            },
        };
        let cfg = bincode::config::standard();
        let header = Header {
            magic: MAGIC,
            version: 2,
        };
        let mut bytes = bincode::serde::encode_to_vec(header, cfg).expect("header");
        bytes.extend(bincode::serde::encode_to_vec(&payload, cfg).expect("payload"));
        let path = std::env::temp_dir().join(format!("ckpt-v2-{}.ckpt", std::process::id()));
        std::fs::write(&path, bytes).expect("write");
        let mut loaded = Simulation::load_checkpoint(&path).expect("a version-2 checkpoint loads");
        std::fs::remove_file(&path).ok();
        assert_eq!(loaded.state().expect("state"), s);
        sim.step_n(200).expect("steps");
        loaded.step_n(200).expect("steps");
        assert_eq!(loaded.state().expect("state"), sim.state().expect("state"));
    }
}
