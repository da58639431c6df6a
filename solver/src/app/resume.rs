//! `--load-shm`: a frame of a dead run is checked as strictly as a case file before anything
//! resumes from it. The segment may have been written by a crashing solver or by anyone with
//! access to it, so nothing in it is trusted: the simulated time, the ids, the radii, every
//! position and velocity, and the frame's agreement with the static section.

use anyhow::{bail, Result};
use shm_protocol::{Frame, StaticData};
use solver::case::{Case, InitialParticle};
use solver::core::vec3;
use solver::dem::state::ParticleFlow;
use solver::exec::inflow::Inflows;

/// Largest simulated time a resumed frame may carry [s] (the same bound as every simulated
/// interval, `shm_protocol::limits::SIM_INTERVAL_MAX_S`).
const MAX_SIM_TIME: f64 = shm_protocol::limits::SIM_INTERVAL_MAX_S;

/// Checks `frame` and `stat` of segment `name` against `case` (the case stored in the segment,
/// with the command line's overrides) and returns the live particles (for the stability check
/// and the state) and their ids: 0..n, or the frame's id list in a run whose particle set
/// changes (its static section lists every id the run plans, its frames the live ones).
pub fn check_frame(
    name: &str,
    case: &Case,
    stat: &StaticData,
    frame: &Frame,
) -> Result<(Vec<InitialParticle>, Vec<u32>)> {
    let bad = |what: String| anyhow::anyhow!("segment {name:?}: the last frame {what}");
    let m = &frame.meta;
    if m.static_generation != stat.generation {
        return Err(bad(format!(
            "(seq {}) belongs to static data generation {}, but the static section is \
             generation {}: the segment is inconsistent",
            m.seq, m.static_generation, stat.generation
        )));
    }
    if !(m.sim_time.is_finite() && (0.0..=MAX_SIM_TIME).contains(&m.sim_time)) {
        return Err(bad(format!(
            "has simulated time {} s (must be finite, in [0, {MAX_SIM_TIME:e}])",
            m.sim_time
        )));
    }
    if m.sim_time >= case.end_time {
        bail!(
            "segment {name:?}: the last frame is at t = {} s, at or past the end time {} s; \
             give a later --end-time to continue",
            m.sim_time,
            case.end_time
        );
    }
    let n = m.particle_count as usize;
    let id_count = stat.particle_ids.len();
    let static_ok =
        stat.particle_species.len() == id_count && stat.particle_radius.len() == id_count;
    if !static_ok || (frame.particle_ids.is_none() && id_count != n) {
        return Err(bad(format!(
            "has {n} particles but the static section describes {} ids, {} species and {} radii",
            stat.particle_ids.len(),
            stat.particle_species.len(),
            stat.particle_radius.len()
        )));
    }
    // Ids: the static section lists 0..id_count in order (frames are in id order).
    if let Some((slot, &id)) = stat
        .particle_ids
        .iter()
        .enumerate()
        .find(|&(slot, &id)| id as usize != slot)
    {
        return Err(bad(format!(
            "lists particle id {id} at position {slot}: ids must be unique and in order \
             (duplicate or missing ids)"
        )));
    }
    for (i, (&s, &r)) in stat
        .particle_species
        .iter()
        .zip(&stat.particle_radius)
        .enumerate()
    {
        let Some(sp) = case.species.get(s as usize) else {
            return Err(bad(format!(
                "gives particle {i} species {s}, but the case defines {}",
                case.species.len()
            )));
        };
        // The static radius is the species radius in f32; anything else is corrupt.
        if !(r.is_finite() && r > 0.0) || (r as f64 - sp.radius).abs() > 1e-6 * sp.radius {
            return Err(bad(format!(
                "gives particle {i} radius {r} m, but its species \"{}\" has {} m",
                sp.name, sp.radius
            )));
        }
    }
    // The live particles: every id, or the frame's list (ascending, each one the static
    // section describes).
    let ids: Vec<u32> = match &frame.particle_ids {
        None => (0..n as u32).collect(),
        Some(ids) => {
            if ids.len() != n {
                return Err(bad(format!("lists {} ids for {n} particles", ids.len())));
            }
            if let Some(k) =
                (0..n).find(|&k| ids[k] as usize >= id_count || (k > 0 && ids[k] <= ids[k - 1]))
            {
                return Err(bad(format!(
                    "lists particle id {} at position {k}: the live ids must be ascending and \
                     below the {id_count} ids of the static section",
                    ids[k]
                )));
            }
            ids.clone()
        }
    };
    let get = |v: &Option<Vec<[f32; 3]>>, what: &str| -> Result<Vec<[f32; 3]>> {
        match v {
            Some(v) if v.len() == n => Ok(v.clone()),
            Some(v) => Err(bad(format!("has {} {what} for {n} particles", v.len()))),
            None => Err(bad(format!("has no {what}; it cannot be resumed from"))),
        }
    };
    let pos = get(&frame.positions, "positions")?;
    let vel = get(&frame.velocities, "velocities")?;
    // Positions: inside the domain widened by its own size (particles may leave an open box,
    // but a particle a domain-length away, or at 1e30 m, is corruption).
    let (lo, hi) = (case.domain.min, case.domain.max);
    for (i, p) in pos.iter().enumerate() {
        let inside = (0..3).all(|a| {
            let ext = hi[a] - lo[a];
            let x = p[a] as f64;
            x.is_finite() && x >= lo[a] - ext && x <= hi[a] + ext
        });
        if !inside {
            return Err(bad(format!(
                "places particle {i} at {p:?} m, far outside the domain {lo:?} .. {hi:?}"
            )));
        }
    }
    // Velocities: finite and below one radius per time step (faster particles pass through
    // each other between two neighbour searches).
    let r_min = case
        .species
        .iter()
        .map(|s| s.radius)
        .fold(f64::INFINITY, f64::min);
    let v_max = r_min / case.dt;
    for (i, v) in vel.iter().enumerate() {
        let speed = vec3::norm(vec3::from_f32(*v));
        if !(speed.is_finite() && speed <= v_max) {
            return Err(bad(format!(
                "gives particle {i} a speed of {speed} m/s; at dt = {} s at most {v_max:.3e} m/s \
                 (one smallest radius per step) can be simulated",
                case.dt
            )));
        }
    }
    if let Some(w) = &frame.angular_velocities {
        if let Some(i) = w.iter().position(|w| !w.iter().all(|c| c.is_finite())) {
            return Err(bad(format!(
                "gives particle {i} a non-finite angular velocity"
            )));
        }
    }
    let particles = (0..n)
        .map(|i| InitialParticle {
            species: stat.particle_species[ids[i] as usize],
            position: vec3::from_f32(pos[i]),
            velocity: vec3::from_f32(vel[i]),
        })
        .collect();
    Ok((particles, ids))
}

/// What a run with inflow or outflow had removed and added by the frame it resumes from: the
/// removed count and mass the frame carries, and the inflow sources' plans and progress
/// ([`Inflows::resumed_flow`]; the particles the case places at t = 0 are the static ids
/// before every planned one). `case` is the case as stored, before the command line's
/// overrides: the plan was made with it (a source without an end runs to the end time).
pub fn resumed_flow(
    name: &str,
    case: &Case,
    stat: &StaticData,
    frame: &Frame,
    ids: &[u32],
) -> Result<ParticleFlow> {
    let bad = |what: String| anyhow::anyhow!("segment {name:?}: the last frame {what}");
    let m = &frame.meta;
    let id_count = stat.particle_ids.len() as u64;
    // Every id is live, removed or not yet added: the counts cannot exceed the ids.
    let accounted = m.removed_count.saturating_add(ids.len() as u64);
    if accounted > id_count || !(m.removed_mass.is_finite() && m.removed_mass >= 0.0) {
        return Err(bad(format!(
            "says {} particles ({} kg) were removed besides its {} live ones, of a run with \
             {id_count} ids",
            m.removed_count,
            m.removed_mass,
            ids.len()
        )));
    }
    let planned = Inflows::planned_total(case)?;
    let Some(initial) = id_count
        .checked_sub(planned)
        .and_then(|n| u32::try_from(n).ok())
    else {
        bail!(
            "segment {name:?}: its static section lists {id_count} ids, but its case's inflow \
             sources plan {planned}: the segment does not belong to this case"
        );
    };
    let mut flow = Inflows::resumed_flow(case, initial, ids, m.sim_time)?;
    flow.removed_count = m.removed_count;
    flow.removed_mass = m.removed_mass;
    Ok(flow)
}
