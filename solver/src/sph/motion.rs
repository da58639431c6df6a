//! Solids that move with a prescribed motion (`[[obstacles]] motion = { ... }`, the DEM meshes'
//! [`Motion`]): their boundary particles are placed at each evaluation from their rest positions
//! (t = 0) and the body's pose, x = R x0 + T, with the body's velocity at x,
//! v = velocity + omega x (x - center). Nothing about them is integrated but their density
//! (dynamic boundary particles, Crespo et al. 2007, as DualSPHysics moves its boundaries), so a
//! solid never drifts from its schedule, and a run restarted from a checkpoint places them with
//! the same bits.

use crate::core::geometry::{BodyTransform, Motion};
use crate::core::vec3::V3;
use serde::{Deserialize, Serialize};

/// Moving solids the GPU takes as one kernel parameter (`SPH_MAX_BODIES` in sph.cu): 16 poses of
/// 168 bytes fit the 4 KiB a launch's parameters may hold.
pub const MAX_MOVING_SOLIDS: usize = 16;

/// The boundary particles of the moving solids of a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MovingSolids {
    /// The motion of each moving solid (`obstacles` with a motion that is not fixed, in order).
    /// Serialized as JSON text: `Motion` is an internally tagged enum, which bincode (the MPI
    /// ranks' start message) cannot read.
    #[serde(with = "motions_as_json")]
    pub motions: Vec<Motion>,
    /// Ids of the moving boundary particles, ascending.
    pub ids: Vec<u32>,
    /// The solid of each (an index into `motions`).
    pub body: Vec<u32>,
    /// The position of each at t = 0 [m].
    pub rest: Vec<V3>,
}

/// The motions of [`MovingSolids`] as one JSON string.
mod motions_as_json {
    use super::Motion;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(m: &[Motion], s: S) -> Result<S::Ok, S::Error> {
        serde_json::to_string(m)
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Motion>, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}

/// Position and velocity of the body point `rest` in the pose `t` (the twin of `sph_body_place`
/// in sph.cu): x = R rest + T, v = velocity + omega x (x - center).
#[inline]
pub fn body_place(t: &BodyTransform, rest: V3) -> (V3, V3) {
    let x = t.apply(rest);
    (x, t.wall_velocity(x))
}

impl MovingSolids {
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The pose of every solid at time `t` [s].
    pub fn transforms(&self, t: f64) -> Vec<BodyTransform> {
        self.motions.iter().map(|m| m.transform_at(t)).collect()
    }

    /// Places the moving particles in the id-indexed `pos` and `vel` at time `t`.
    pub fn place(&self, t: f64, pos: &mut [V3], vel: &mut [V3]) {
        if self.is_empty() {
            return;
        }
        let tr = self.transforms(t);
        for ((&id, &b), &x0) in self.ids.iter().zip(&self.body).zip(&self.rest) {
            let (x, v) = body_place(&tr[b as usize], x0);
            pos[id as usize] = x;
            vel[id as usize] = v;
        }
    }

    /// `pos` with the moving particles at rest: what the run's grid is built from, so that a
    /// restart gets the grid, hence the order of every sum, of the run that wrote it.
    pub fn at_rest(&self, pos: &[V3]) -> Vec<V3> {
        let mut out = pos.to_vec();
        for (&id, &x0) in self.ids.iter().zip(&self.rest) {
            out[id as usize] = x0;
        }
        out
    }

    /// Checks the solids against a state of `n` particles (ids in range and ascending, one
    /// solid each, at most [`MAX_MOVING_SOLIDS`] solids).
    pub fn check(&self, n: usize) -> Result<(), String> {
        if self.motions.len() > MAX_MOVING_SOLIDS {
            return Err(format!(
                "{} moving solids; at most {MAX_MOVING_SOLIDS} may move",
                self.motions.len()
            ));
        }
        if self.body.len() != self.ids.len() || self.rest.len() != self.ids.len() {
            return Err("moving solids: arrays of different lengths".into());
        }
        if self.ids.windows(2).any(|w| w[0] >= w[1])
            || self.ids.last().is_some_and(|&k| k as usize >= n)
        {
            return Err(format!(
                "moving solids: ids not ascending within the {n} particles"
            ));
        }
        if self.body.iter().any(|&b| b as usize >= self.motions.len()) {
            return Err("moving solids: a particle of no solid".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::geometry::Segment;

    fn solids() -> MovingSolids {
        MovingSolids {
            motions: vec![
                Motion::Translation {
                    velocity: [0.5, 0.0, -0.25],
                },
                Motion::Rotation {
                    axis_point: [1.0, 0.0, 0.0],
                    axis_direction: [0.0, 0.0, 1.0],
                    rpm: 15.0,
                },
            ],
            ids: vec![1, 3],
            body: vec![0, 1],
            rest: vec![[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]],
        }
    }

    #[test]
    fn moving_solids_travel_through_the_ranks_encoding() {
        let m = solids();
        let back: MovingSolids =
            crate::exec::comm::decode(&crate::exec::comm::encode(&m), "solids");
        assert_eq!(back, m);
    }

    #[test]
    fn particles_follow_their_solid_and_others_stay() {
        let m = solids();
        m.check(4).unwrap();
        let mut pos = vec![[9.0; 3]; 4];
        let mut vel = vec![[0.0; 3]; 4];
        m.place(1.0, &mut pos, &mut vel);
        // Translation: rest + v t, velocity v.
        assert_eq!(pos[1], [0.5, 0.0, 0.75]);
        assert_eq!(vel[1], [0.5, 0.0, -0.25]);
        // A quarter turn (15 rpm, 1 s) about the axis through (1, 0, 0): (2, 0, 0) -> (1, 1, 0),
        // moving at omega r = pi/2 m/s along -x.
        assert!((pos[3][0] - 1.0).abs() < 1e-12 && (pos[3][1] - 1.0).abs() < 1e-12);
        let w = std::f64::consts::PI / 2.0;
        assert!((vel[3][0] + w).abs() < 1e-12 && vel[3][1].abs() < 1e-12);
        // Particles of no moving solid keep what they had.
        assert_eq!((pos[0], pos[2]), ([9.0; 3], [9.0; 3]));
        // At rest: the positions at t = 0.
        assert_eq!(m.at_rest(&pos)[3], [2.0, 0.0, 0.0]);
        let mut p0 = pos.clone();
        m.place(0.0, &mut p0, &mut vel);
        assert_eq!(p0[1], m.rest[0]);
        assert_eq!(p0[3], m.rest[1]);
    }

    #[test]
    fn a_schedule_holds_its_pose_after_it_ends() {
        let m = MovingSolids {
            motions: vec![Motion::Schedule {
                segments: vec![Segment::Translation {
                    start: 0.0,
                    end: Some(0.5),
                    velocity: [0.1, 0.0, 0.0],
                    velocity_end: None,
                }],
            }],
            ids: vec![0],
            body: vec![0],
            rest: vec![[0.0; 3]],
        };
        let (mut pos, mut vel) = (vec![[0.0; 3]], vec![[0.0; 3]]);
        m.place(2.0, &mut pos, &mut vel);
        assert!((pos[0][0] - 0.05).abs() < 1e-15);
        assert_eq!(vel[0], [0.0; 3]);
    }

    #[test]
    fn bad_solids_are_named() {
        let mut m = solids();
        assert!(m.check(3).unwrap_err().contains("ids"));
        m.body[1] = 2;
        assert!(m.check(4).unwrap_err().contains("no solid"));
        let mut m = solids();
        m.motions = vec![Motion::Fixed; MAX_MOVING_SOLIDS + 1];
        assert!(m.check(4).unwrap_err().contains("at most"));
    }
}
