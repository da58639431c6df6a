//! Prescribed motion of a mesh: the body transform at time t and the wall velocity at a point.

use crate::core::vec3::{self, V3};
use serde::{Deserialize, Serialize};

/// Prescribed motion, `motion = { type = "fixed" | "translation" | "rotation", ... }`.
/// Body coordinates are the mesh's coordinates at t = 0.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Motion {
    #[default]
    Fixed,
    /// Constant translation velocity [m/s].
    Translation { velocity: [f64; 3] },
    /// Rotation about the axis through `axis_point` along `axis_direction` (right-hand rule),
    /// `rpm` revolutions per minute.
    Rotation {
        axis_point: [f64; 3],
        axis_direction: [f64; 3],
        rpm: f64,
    },
}

/// Pose and velocity field of a moving body at one instant: x_world = R x_body + T, and the
/// velocity of the body at world point p is v = velocity + omega x (p - center).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BodyTransform {
    /// Rotation matrix, row-major.
    pub rotation: [f64; 9],
    /// Translation [m].
    pub translation: V3,
    /// Linear velocity of the point `center` [m/s].
    pub velocity: V3,
    /// Angular velocity [rad/s].
    pub omega: V3,
    /// A point on the rotation axis, in world coordinates [m].
    pub center: V3,
}

pub const IDENTITY: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];

/// Rotation matrix (row-major) for angle `theta` [rad] about unit axis `u` (Rodrigues' formula).
pub fn axis_angle_matrix(u: V3, theta: f64) -> [f64; 9] {
    let (s, c) = theta.sin_cos();
    let t = 1.0 - c;
    let [x, y, z] = u;
    [
        t * x * x + c,
        t * x * y - s * z,
        t * x * z + s * y,
        t * x * y + s * z,
        t * y * y + c,
        t * y * z - s * x,
        t * x * z - s * y,
        t * y * z + s * x,
        t * z * z + c,
    ]
}

impl Motion {
    /// Angular velocity vector [rad/s] (zero unless rotating).
    pub fn omega(&self) -> V3 {
        match self {
            Motion::Rotation {
                axis_direction,
                rpm,
                ..
            } => vec3::scale(
                vec3::normalize_or_zero(*axis_direction),
                rpm * 2.0 * std::f64::consts::PI / 60.0,
            ),
            _ => vec3::ZERO,
        }
    }

    /// Pose and velocity field at time `t` [s].
    pub fn transform_at(&self, t: f64) -> BodyTransform {
        match self {
            Motion::Fixed => BodyTransform {
                rotation: IDENTITY,
                translation: vec3::ZERO,
                velocity: vec3::ZERO,
                omega: vec3::ZERO,
                center: vec3::ZERO,
            },
            Motion::Translation { velocity } => BodyTransform {
                rotation: IDENTITY,
                translation: vec3::scale(*velocity, t),
                velocity: *velocity,
                omega: vec3::ZERO,
                center: vec3::ZERO,
            },
            Motion::Rotation {
                axis_point,
                axis_direction,
                rpm,
            } => {
                let u = vec3::normalize_or_zero(*axis_direction);
                let theta = rpm * 2.0 * std::f64::consts::PI / 60.0 * t;
                let rotation = axis_angle_matrix(u, theta);
                // x_w = R (x_b - p) + p  =>  T = p - R p
                let translation = vec3::sub(*axis_point, vec3::mat_vec(&rotation, *axis_point));
                BodyTransform {
                    rotation,
                    translation,
                    velocity: vec3::ZERO,
                    omega: self.omega(),
                    center: *axis_point,
                }
            }
        }
    }

    pub fn is_fixed(&self) -> bool {
        matches!(self, Motion::Fixed)
    }
}

impl BodyTransform {
    /// World position of body point `p`.
    #[inline]
    pub fn apply(&self, p: V3) -> V3 {
        vec3::add(vec3::mat_vec(&self.rotation, p), self.translation)
    }

    /// Velocity of the body at world point `p`: v = v_lin + omega x (p - center) [m/s].
    #[inline]
    pub fn wall_velocity(&self, p: V3) -> V3 {
        vec3::add(
            self.velocity,
            vec3::cross(self.omega, vec3::sub(p, self.center)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarter_turn_about_offset_axis() {
        let m = Motion::Rotation {
            axis_point: [1.0, 0.0, 0.0],
            axis_direction: [0.0, 0.0, 2.0],
            rpm: 15.0,
        };
        // 15 rpm: a quarter turn takes 1 s.
        let t = m.transform_at(1.0);
        let p = t.apply([2.0, 0.0, 0.0]);
        assert!((p[0] - 1.0).abs() < 1e-12 && (p[1] - 1.0).abs() < 1e-12);
        let v = t.wall_velocity(p);
        let w = 15.0 * 2.0 * std::f64::consts::PI / 60.0;
        assert!((v[0] + w).abs() < 1e-12 && v[1].abs() < 1e-12);
    }
}
