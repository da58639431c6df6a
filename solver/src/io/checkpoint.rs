//! Checkpoint/restart: the case (as TOML), the mesh triangles and the full state including
//! contact history, encoded with bincode 2 (serde, standard config). Restarting continues
//! bit-for-bit.

use crate::case::{Case, CaseError};
use crate::core::geometry::Mesh;
use crate::core::stl::Triangle;
use crate::decomp::DecompositionOverride;
use crate::dem::state::SimState;
use crate::exec::sim::{BackendKind, Simulation};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const MAGIC: [u8; 8] = *b"PSHMCKPT";
/// Bumped whenever the encoded layout changes. Version 2 stores particle ids with the state
/// (version 1 implied 0..n; it is still read).
pub const CHECKPOINT_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Header {
    magic: [u8; 8],
    version: u32,
}

/// A version-1 state: [`SimState`] without ids (they were 0..n).
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
    history: Vec<crate::dem::state::HistEntry>,
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

impl From<PayloadV1> for Payload {
    fn from(p: PayloadV1) -> Payload {
        let s = p.state;
        Payload {
            case_toml: p.case_toml,
            case_name: p.case_name,
            base_dir: p.base_dir,
            mesh_triangles: p.mesh_triangles,
            state: SimState {
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
    /// Writes a checkpoint (atomically: to `path.tmp`, then renamed).
    pub fn save_checkpoint(&self, path: &Path) -> Result<(), CheckpointError> {
        let case = self.case();
        let payload = Payload {
            case_toml: case.to_toml().map_err(|e| CheckpointError::Encode {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?,
            case_name: case.origin.name.clone(),
            base_dir: case.origin.base_dir.clone(),
            mesh_triangles: self.meshes().iter().map(|m| m.triangles.clone()).collect(),
            state: self.state().map_err(|source| CheckpointError::State {
                path: path.to_path_buf(),
                source,
            })?,
        };
        let cfg = bincode::config::standard();
        let enc = |e: bincode::error::EncodeError| CheckpointError::Encode {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut bytes = bincode::serde::encode_to_vec(
            Header {
                magic: MAGIC,
                version: CHECKPOINT_VERSION,
            },
            cfg,
        )
        .map_err(enc)?;
        bytes.extend(bincode::serde::encode_to_vec(&payload, cfg).map_err(enc)?);
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
        let cfg = bincode::config::standard();
        let dec = |e: bincode::error::DecodeError| CheckpointError::Decode {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let (header, used): (Header, usize) = bincode::serde::decode_from_slice(&bytes, cfg)
            .map_err(|_| CheckpointError::BadMagic {
                path: path.to_path_buf(),
            })?;
        if header.magic != MAGIC {
            return Err(CheckpointError::BadMagic {
                path: path.to_path_buf(),
            });
        }
        let p: Payload = match header.version {
            1 => bincode::serde::decode_from_slice::<PayloadV1, _>(&bytes[used..], cfg)
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
        let mut case =
            Case::from_toml_str(&p.case_toml, &p.case_name, &p.base_dir).map_err(|source| {
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
        case.decomposition = decomposition.apply(case.decomposition);
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
        Simulation::assemble(case, meshes, p.state, Vec::new(), kind).map_err(|source| {
            CheckpointError::Backend {
                path: path.to_path_buf(),
                source: Box::new(source),
            }
        })
    }
}
