//! Checkpoint/restart: the case (as TOML), the mesh triangles and the full state including
//! contact history, encoded with bincode 2 (serde, standard config). Restarting continues
//! bit-for-bit.

use crate::backend::SimState;
use crate::case::{Case, CaseError};
use crate::geometry::Mesh;
use crate::sim::{BackendKind, Simulation};
use crate::stl::Triangle;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const MAGIC: [u8; 8] = *b"PSHMCKPT";
/// Bumped whenever the encoded layout changes.
pub const CHECKPOINT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Header {
    magic: [u8; 8],
    version: u32,
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
    #[error("{path}: checkpoint version {found}, this build reads version {CHECKPOINT_VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: cannot encode checkpoint: {message}")]
    Encode { path: PathBuf, message: String },
    #[error("{path}: corrupt checkpoint: {message}")]
    Decode { path: PathBuf, message: String },
    #[error("{path}: cannot read the state from the backend: {source}")]
    State {
        path: PathBuf,
        #[source]
        source: crate::backend::StepError,
    },
    #[error("{path}: cannot start the backend for this checkpoint: {source}")]
    Backend {
        path: PathBuf,
        #[source]
        source: Box<crate::sim::SimError>,
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
        if header.version != CHECKPOINT_VERSION {
            return Err(CheckpointError::Version {
                path: path.to_path_buf(),
                found: header.version,
            });
        }
        let (p, _): (Payload, usize) =
            bincode::serde::decode_from_slice(&bytes[used..], cfg).map_err(dec)?;
        let case =
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
        let st = &p.state;
        let n = st.pos.len();
        let consistent = [
            st.vel.len(),
            st.omega.len(),
            st.force.len(),
            st.torque.len(),
            st.contacts.len(),
            st.species.len(),
        ]
        .iter()
        .all(|&l| l == n)
            && st.history.len() == n * crate::backend::HISTORY_CAP
            && st
                .species
                .iter()
                .all(|&s| (s as usize) < case.species.len());
        if !consistent {
            return Err(CheckpointError::Decode {
                path: path.to_path_buf(),
                message: "particle arrays have inconsistent lengths or species".into(),
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
        Simulation::assemble(case, meshes, p.state, Vec::new(), kind).map_err(|source| {
            CheckpointError::Backend {
                path: path.to_path_buf(),
                source: Box::new(source),
            }
        })
    }
}
