//! The static section: configuration, species, per-particle static data and meshes, written
//! rarely under its own seqlock (`StaticHeader::generation`, odd while being rewritten).

use std::sync::atomic::{fence, Ordering};

use crate::error::{PublishError, ReadError};
use crate::layout::*;
use crate::segment::Region;

/// A mesh as published: a name and its triangles in the body frame (three vertices, 9 f32).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MeshStatic {
    pub name: String,
    pub triangles: Vec<[f32; 9]>,
}

/// Everything in the static section, owned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StaticData {
    /// Case configuration as TOML text.
    pub config_toml: String,
    pub species: Vec<SpeciesRecord>,
    /// Per particle, in id order (index i describes the particle whose data is at index i of
    /// every frame array).
    pub particle_ids: Vec<u32>,
    pub particle_species: Vec<u32>,
    pub particle_radius: Vec<f32>,
    pub meshes: Vec<MeshStatic>,
    pub world_min: [f64; 3],
    pub world_max: [f64; 3],
    pub cell_size: f64,
    /// Generation read (even); ignored when writing.
    pub generation: u64,
}

impl StaticData {
    /// Whether a frame belongs to this static data: its static generation must be this one's
    /// (a frame published before any static data carries 0 and matches empty static data).
    /// A reader that re-read the static section and still gets a mismatch must not pair them:
    /// ids, radii and meshes would describe other particles.
    pub fn check_frame(&self, meta: &crate::frame::FrameMeta) -> Result<(), ReadError> {
        if meta.static_generation != self.generation {
            return Err(ReadError::StaticMismatch {
                seq: meta.seq,
                frame: meta.static_generation,
                current: self.generation,
            });
        }
        Ok(())
    }

    /// The static entries of a frame's elements: with the frame's `particle_id` array (runs
    /// whose particle set changes, static arrays indexed by id) entry `ids[i]` of `arr` for each
    /// element, else `arr` itself (element i is static entry i). An id outside `arr` is corrupt
    /// data: an error naming it, never a panic.
    pub fn per_element<'a, T: Copy>(
        arr: &'a [T],
        ids: Option<&[u32]>,
    ) -> Result<std::borrow::Cow<'a, [T]>, ReadError> {
        match ids {
            None => Ok(std::borrow::Cow::Borrowed(arr)),
            Some(ids) => ids
                .iter()
                .map(|&id| {
                    arr.get(id as usize).copied().ok_or_else(|| {
                        ReadError::Corrupt(format!(
                            "frame names particle id {id}, but the static section lists {} particles",
                            arr.len()
                        ))
                    })
                })
                .collect::<Result<Vec<T>, _>>()
                .map(std::borrow::Cow::Owned),
        }
    }
}

/// Encodes `name` into a fixed NUL-padded field (truncated at a character boundary).
pub fn encode_name(name: &str) -> [u8; NAME_LEN] {
    let mut out = [0u8; NAME_LEN];
    let mut end = name.len().min(NAME_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    out[..end].copy_from_slice(&name.as_bytes()[..end]);
    out
}

impl SpeciesRecord {
    /// A species known by name, radius [m] and density [kg/m^3] only (material fields 0: not
    /// given), e.g. for a publisher without contact physics.
    pub fn named(name: &str, radius: f64, density: f64) -> Self {
        Self {
            name: encode_name(name),
            radius,
            density,
            ..Self::default()
        }
    }
}

/// Decodes a NUL-padded name (invalid UTF-8 replaced).
pub fn decode_name(raw: &[u8; NAME_LEN]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

fn over(what: &'static str, got: usize, capacity: u64) -> PublishError {
    PublishError::OverCapacity {
        what,
        got: got as u64,
        capacity,
    }
}

/// Writes `data` into the static section and bumps the generation. Returns the new (even)
/// generation. Only the segment's owner calls this.
pub(crate) fn write_static(region: &Region, data: &StaticData) -> Result<u64, PublishError> {
    let caps = *region.capacities();
    let plan = *region.plan();
    let n = data.particle_ids.len();
    if n as u64 > caps.max_particles {
        return Err(over("particles", n, caps.max_particles));
    }
    if data.particle_species.len() != n || data.particle_radius.len() != n {
        return Err(over(
            "per-particle static arrays (ids, species, radius differ in length)",
            data.particle_species.len().max(data.particle_radius.len()),
            n as u64,
        ));
    }
    if data.species.len() as u64 > caps.max_species as u64 {
        return Err(over("species", data.species.len(), caps.max_species as u64));
    }
    if data.meshes.len() as u64 > caps.max_bodies as u64 {
        return Err(over("meshes", data.meshes.len(), caps.max_bodies as u64));
    }
    let triangles: usize = data.meshes.iter().map(|m| m.triangles.len()).sum();
    if triangles as u64 > caps.max_triangles {
        return Err(over("triangles", triangles, caps.max_triangles));
    }
    if data.config_toml.len() as u64 > caps.config_bytes as u64 {
        return Err(over(
            "configuration bytes",
            data.config_toml.len(),
            caps.config_bytes as u64,
        ));
    }

    let sh = region.static_header();
    // SAFETY: all writes below stay inside arrays whose sizes were checked against the
    // capacities the plan was computed from; only the owner writes the static section, and the
    // odd generation tells readers to discard what they see meanwhile.
    unsafe {
        let gen = (*sh).generation.load(Ordering::Relaxed);
        let odd = gen | 1;
        (*sh).generation.store(odd, Ordering::Relaxed);
        fence(Ordering::Release);
        let cfg = region.at(plan.config_offset);
        std::ptr::copy_nonoverlapping(data.config_toml.as_ptr(), cfg, data.config_toml.len());
        let sp = region.at(plan.species_offset) as *mut SpeciesRecord;
        std::ptr::copy_nonoverlapping(data.species.as_ptr(), sp, data.species.len());
        copy(region, plan.particle_id_offset, &data.particle_ids);
        copy(region, plan.particle_species_offset, &data.particle_species);
        copy(region, plan.particle_radius_offset, &data.particle_radius);
        let table = region.at(plan.mesh_table_offset) as *mut MeshRecord;
        let tris = region.at(plan.triangles_offset) as *mut [f32; 9];
        let mut first = 0usize;
        for (i, m) in data.meshes.iter().enumerate() {
            table.add(i).write(MeshRecord {
                name: encode_name(&m.name),
                first_triangle: first as u64,
                triangle_count: m.triangles.len() as u64,
                _reserved: [0; 2],
            });
            std::ptr::copy_nonoverlapping(m.triangles.as_ptr(), tris.add(first), m.triangles.len());
            first += m.triangles.len();
        }
        std::ptr::write_volatile(&mut (*sh).particle_count, n as u64);
        std::ptr::write_volatile(&mut (*sh).triangle_count, triangles as u64);
        std::ptr::write_volatile(&mut (*sh).species_count, data.species.len() as u32);
        std::ptr::write_volatile(&mut (*sh).mesh_count, data.meshes.len() as u32);
        std::ptr::write_volatile(&mut (*sh).config_len, data.config_toml.len() as u32);
        std::ptr::write_volatile(&mut (*sh).config_format, 1);
        std::ptr::write_volatile(&mut (*sh).world_min, data.world_min);
        std::ptr::write_volatile(&mut (*sh).world_max, data.world_max);
        std::ptr::write_volatile(&mut (*sh).cell_size, data.cell_size);
        let even = odd + 1;
        (*sh).generation.store(even, Ordering::Release);
        Ok(even)
    }
}

unsafe fn copy<T: Copy>(region: &Region, offset: u64, src: &[T]) {
    std::ptr::copy_nonoverlapping(src.as_ptr(), region.at(offset) as *mut T, src.len());
}

unsafe fn read_vec<T: Copy>(region: &Region, offset: u64, count: usize) -> Vec<T> {
    std::slice::from_raw_parts(region.at(offset) as *const T, count).to_vec()
}

fn corrupt(msg: String) -> ReadError {
    ReadError::Corrupt(msg)
}

/// Copies the static section, validating every count before use.
pub(crate) fn read_static(region: &Region) -> Result<StaticData, ReadError> {
    let caps = *region.capacities();
    let plan = *region.plan();
    let sh = region.static_header();
    for _ in 0..crate::frame::READ_RETRIES {
        // SAFETY: `sh` is inside the validated region; plain fields are read volatile and the
        // whole copy is discarded unless the generation is unchanged and even afterwards.
        let attempt = unsafe {
            let gen = (*sh).generation.load(Ordering::Acquire);
            if gen == 0 {
                return Err(ReadError::NoStatic);
            }
            if gen % 2 == 1 {
                std::thread::yield_now();
                continue;
            }
            let n = std::ptr::read_volatile(&(*sh).particle_count);
            let t = std::ptr::read_volatile(&(*sh).triangle_count);
            let s = std::ptr::read_volatile(&(*sh).species_count);
            let m = std::ptr::read_volatile(&(*sh).mesh_count);
            let c = std::ptr::read_volatile(&(*sh).config_len);
            let checked = (|| {
                if n > caps.max_particles {
                    return Err(corrupt(format!(
                        "static section claims {n} particles, capacity {}",
                        caps.max_particles
                    )));
                }
                if t > caps.max_triangles {
                    return Err(corrupt(format!(
                        "static section claims {t} triangles, capacity {}",
                        caps.max_triangles
                    )));
                }
                if s > caps.max_species {
                    return Err(corrupt(format!(
                        "static section claims {s} species, capacity {}",
                        caps.max_species
                    )));
                }
                if m > caps.max_bodies {
                    return Err(corrupt(format!(
                        "static section claims {m} meshes, capacity {}",
                        caps.max_bodies
                    )));
                }
                if c > caps.config_bytes {
                    return Err(corrupt(format!(
                        "configuration length {c} exceeds its {} bytes",
                        caps.config_bytes
                    )));
                }
                Ok(())
            })();
            let result = checked.and_then(|()| {
                let config = read_vec::<u8>(region, plan.config_offset, c as usize);
                let records: Vec<MeshRecord> = read_vec(region, plan.mesh_table_offset, m as usize);
                let all_tris: Vec<[f32; 9]> = read_vec(region, plan.triangles_offset, t as usize);
                let mut meshes = Vec::with_capacity(records.len());
                for (i, r) in records.iter().enumerate() {
                    let end = r
                        .first_triangle
                        .checked_add(r.triangle_count)
                        .filter(|&e| e <= t);
                    let Some(end) = end else {
                        return Err(corrupt(format!(
                            "mesh {i} triangle range {}+{} is outside the {t} triangles",
                            r.first_triangle, r.triangle_count
                        )));
                    };
                    meshes.push(MeshStatic {
                        name: decode_name(&r.name),
                        triangles: all_tris[r.first_triangle as usize..end as usize].to_vec(),
                    });
                }
                Ok(StaticData {
                    config_toml: String::from_utf8_lossy(&config).into_owned(),
                    species: read_vec(region, plan.species_offset, s as usize),
                    particle_ids: read_vec(region, plan.particle_id_offset, n as usize),
                    particle_species: read_vec(region, plan.particle_species_offset, n as usize),
                    particle_radius: read_vec(region, plan.particle_radius_offset, n as usize),
                    meshes,
                    world_min: std::ptr::read_volatile(&(*sh).world_min),
                    world_max: std::ptr::read_volatile(&(*sh).world_max),
                    cell_size: std::ptr::read_volatile(&(*sh).cell_size),
                    generation: gen,
                })
            });
            fence(Ordering::Acquire);
            if (*sh).generation.load(Ordering::Relaxed) != gen {
                continue;
            }
            result
        };
        return attempt;
    }
    Err(ReadError::Contended(crate::frame::READ_RETRIES))
}
