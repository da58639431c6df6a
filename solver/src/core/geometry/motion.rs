//! Prescribed motion of a mesh: the body transform at time t and the wall velocity at a point.

use crate::core::vec3::{self, V3};
use serde::{Deserialize, Serialize};

/// Prescribed motion, `motion = { type = "fixed" | "translation" | "rotation" | "schedule", ... }`.
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
    /// Piecewise motion: `segments` in time order, each active on [start, end). Between segments,
    /// before the first and after the last the body holds its pose. See [`Segment`].
    Schedule { segments: Vec<Segment> },
    /// Harmonic translation (a shaker table, a vibrated bed, a tank sloshing side to side): the
    /// displacement amplitude (sin(2 pi f t + phase) - sin(phase)) [m], so that the body is in
    /// its own pose at t = 0. `phase_deg` 0 (default) starts at full speed 2 pi f |amplitude|;
    /// 90 starts at rest and swings to 2 amplitude and back.
    Oscillation {
        amplitude: [f64; 3],
        frequency: f64,
        #[serde(default)]
        phase_deg: f64,
    },
    /// Harmonic rotation about the axis through `axis_point` along `axis_direction` (right-hand
    /// rule; a rolling tank, a rocking sieve): the angle amplitude_deg (sin(2 pi f t + phase) -
    /// sin(phase)) degrees, zero at t = 0.
    Rocking {
        axis_point: [f64; 3],
        axis_direction: [f64; 3],
        amplitude_deg: f64,
        frequency: f64,
        #[serde(default)]
        phase_deg: f64,
    },
}

/// The phase of a harmonic motion at time t, and its rate: (2 pi f t + phase, 2 pi f).
fn harmonic(frequency: f64, phase_deg: f64, t: f64) -> (f64, f64) {
    let w = 2.0 * std::f64::consts::PI * frequency;
    (w * t + phase_deg.to_radians(), w)
}

/// One piece of a [`Motion::Schedule`]. Times are simulated seconds; a ramped segment
/// (`velocity_end` / `rpm_end`) changes its rate linearly from `start` to `end`, so a drum spins
/// up without a jerk in the wall speed. Rotation axes are in body coordinates (the mesh's
/// coordinates at t = 0) and move with the body; translation velocities are in world coordinates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Segment {
    /// At rest over [start, end) (the same as a gap between segments; for readability).
    Hold { start: f64, end: f64 },
    /// Translation at `velocity` [m/s], ramping to `velocity_end` at `end` when given. Without
    /// `end` (last segment only) it lasts to the end of the run.
    Translation {
        start: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<f64>,
        velocity: [f64; 3],
        #[serde(default, skip_serializing_if = "Option::is_none")]
        velocity_end: Option<[f64; 3]>,
    },
    /// Rotation at `rpm` about the body axis through `axis_point` along `axis_direction`
    /// (right-hand rule), ramping to `rpm_end` at `end` when given.
    Rotation {
        start: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<f64>,
        axis_point: [f64; 3],
        axis_direction: [f64; 3],
        rpm: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rpm_end: Option<f64>,
    },
}

impl Segment {
    pub fn start(&self) -> f64 {
        match self {
            Segment::Hold { start, .. }
            | Segment::Translation { start, .. }
            | Segment::Rotation { start, .. } => *start,
        }
    }

    /// End time; `None`: lasts to the end of the run.
    pub fn end(&self) -> Option<f64> {
        match self {
            Segment::Hold { end, .. } => Some(*end),
            Segment::Translation { end, .. } | Segment::Rotation { end, .. } => *end,
        }
    }

    /// Whether the segment ramps its rate (then it needs an `end`).
    pub fn is_ramp(&self) -> bool {
        matches!(
            self,
            Segment::Translation {
                velocity_end: Some(_),
                ..
            } | Segment::Rotation {
                rpm_end: Some(_),
                ..
            }
        )
    }

    /// Rate at `tau` seconds into the segment and the distance (or angle) covered by then:
    /// r(tau) = r0 + (r1 - r0) tau / L and its integral r0 tau + (r1 - r0) tau^2 / (2 L).
    fn ramp(&self, r0: f64, r1: Option<f64>, tau: f64) -> (f64, f64) {
        match (r1, self.end()) {
            (Some(r1), Some(end)) => {
                let len = end - self.start();
                let a = (r1 - r0) / len;
                (r0 + a * tau, r0 * tau + 0.5 * a * tau * tau)
            }
            _ => (r0, r0 * tau),
        }
    }

    /// Applies `tau` seconds of this segment to the pose `prev` the body had at its start.
    fn advance(&self, prev: &BodyTransform, tau: f64) -> BodyTransform {
        match self {
            Segment::Hold { .. } => prev.at_rest(),
            Segment::Translation {
                velocity,
                velocity_end,
                ..
            } => {
                let mut v = vec3::ZERO;
                let mut d = vec3::ZERO;
                for c in 0..3 {
                    (v[c], d[c]) = self.ramp(velocity[c], velocity_end.map(|e| e[c]), tau);
                }
                BodyTransform {
                    rotation: prev.rotation,
                    translation: vec3::add(prev.translation, d),
                    velocity: v,
                    omega: vec3::ZERO,
                    center: vec3::ZERO,
                }
            }
            Segment::Rotation {
                axis_point,
                axis_direction,
                rpm,
                rpm_end,
                ..
            } => {
                let u = vec3::normalize_or_zero(*axis_direction);
                let (rate, turns) = self.ramp(*rpm, *rpm_end, tau);
                let theta = turns * 2.0 * std::f64::consts::PI / 60.0;
                let w = rate * 2.0 * std::f64::consts::PI / 60.0;
                // Body point x moves to p + R_theta (x - p) in body coordinates, then to the
                // world by the pose at the segment's start.
                let r_theta = axis_angle_matrix(u, theta);
                let local = vec3::sub(*axis_point, vec3::mat_vec(&r_theta, *axis_point));
                BodyTransform {
                    rotation: mat_mul(&prev.rotation, &r_theta),
                    translation: prev.apply(local),
                    velocity: vec3::ZERO,
                    omega: vec3::scale(vec3::mat_vec(&prev.rotation, u), w),
                    center: prev.apply(*axis_point),
                }
            }
        }
    }
}

/// Product of two row-major 3x3 matrices.
fn mat_mul(a: &[f64; 9], b: &[f64; 9]) -> [f64; 9] {
    let mut out = [0.0; 9];
    for i in 0..3 {
        for j in 0..3 {
            out[3 * i + j] = (0..3).map(|k| a[3 * i + k] * b[3 * k + j]).sum();
        }
    }
    out
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

    /// The body at rest in its initial pose.
    pub fn rest() -> BodyTransform {
        BodyTransform {
            rotation: IDENTITY,
            translation: vec3::ZERO,
            velocity: vec3::ZERO,
            omega: vec3::ZERO,
            center: vec3::ZERO,
        }
    }

    /// Pose and velocity field at time `t` [s].
    pub fn transform_at(&self, t: f64) -> BodyTransform {
        match self {
            Motion::Fixed => Self::rest(),
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
                BodyTransform::turned(*axis_point, u, theta, self.omega())
            }
            Motion::Oscillation {
                amplitude,
                frequency,
                phase_deg,
            } => {
                let (phase, w) = harmonic(*frequency, *phase_deg, t);
                let (s0, s, c) = (phase_deg.to_radians().sin(), phase.sin(), phase.cos());
                BodyTransform {
                    rotation: IDENTITY,
                    translation: vec3::scale(*amplitude, s - s0),
                    velocity: vec3::scale(*amplitude, w * c),
                    omega: vec3::ZERO,
                    center: vec3::ZERO,
                }
            }
            Motion::Rocking {
                axis_point,
                axis_direction,
                amplitude_deg,
                frequency,
                phase_deg,
            } => {
                let u = vec3::normalize_or_zero(*axis_direction);
                let (phase, w) = harmonic(*frequency, *phase_deg, t);
                let a = amplitude_deg.to_radians();
                let theta = a * (phase.sin() - phase_deg.to_radians().sin());
                let omega = vec3::scale(u, a * w * phase.cos());
                BodyTransform::turned(*axis_point, u, theta, omega)
            }
            Motion::Schedule { segments } => {
                // Poses compose segment by segment: each starts from where the last left the
                // body. A handful of segments, evaluated once per step on the host.
                let mut pose = Self::rest();
                for s in segments {
                    if t <= s.start() {
                        break;
                    }
                    let tau = match s.end() {
                        Some(end) if t >= end => end - s.start(),
                        _ => t - s.start(),
                    };
                    let next = s.advance(&pose, tau);
                    let done = s.end().is_some_and(|end| t >= end);
                    pose = if done { next.at_rest() } else { next };
                    if !done {
                        break;
                    }
                }
                pose
            }
        }
    }

    /// Whether the body never moves (a schedule of holds only is fixed too).
    pub fn is_fixed(&self) -> bool {
        match self {
            Motion::Fixed => true,
            Motion::Oscillation {
                amplitude,
                frequency,
                ..
            } => *amplitude == [0.0; 3] || *frequency == 0.0,
            Motion::Rocking {
                amplitude_deg,
                frequency,
                ..
            } => *amplitude_deg == 0.0 || *frequency == 0.0,
            Motion::Schedule { segments } => {
                segments.iter().all(|s| matches!(s, Segment::Hold { .. }))
            }
            _ => false,
        }
    }

    /// Largest speed of any of `points` (body coordinates) at any time [m/s], for the time-step
    /// check: the largest over the segments (a segment translates or rotates, never both, and the
    /// distance of a point to a body axis does not change as the body moves).
    pub fn max_speed(&self, points: &[V3]) -> f64 {
        let rot = |axis_point: V3, axis_direction: V3, rpm: f64| {
            let u = vec3::normalize_or_zero(axis_direction);
            let w = rpm.abs() * 2.0 * std::f64::consts::PI / 60.0;
            points
                .iter()
                .map(|&p| w * vec3::norm(vec3::cross(u, vec3::sub(p, axis_point))))
                .fold(0.0, f64::max)
        };
        match self {
            Motion::Fixed => 0.0,
            Motion::Translation { velocity } => vec3::norm(*velocity),
            Motion::Rotation {
                axis_point,
                axis_direction,
                rpm,
            } => rot(*axis_point, *axis_direction, *rpm),
            Motion::Oscillation {
                amplitude,
                frequency,
                ..
            } => 2.0 * std::f64::consts::PI * frequency.abs() * vec3::norm(*amplitude),
            Motion::Rocking {
                axis_point,
                axis_direction,
                amplitude_deg,
                frequency,
                ..
            } => {
                // The largest angular rate in rpm, for the rotation's bound.
                let rpm = amplitude_deg.to_radians().abs() * frequency.abs() * 60.0;
                rot(*axis_point, *axis_direction, rpm)
            }
            Motion::Schedule { segments } => segments
                .iter()
                .map(|s| match s {
                    Segment::Hold { .. } => 0.0,
                    Segment::Translation {
                        velocity,
                        velocity_end,
                        ..
                    } => vec3::norm(*velocity).max(velocity_end.map_or(0.0, vec3::norm)),
                    Segment::Rotation {
                        axis_point,
                        axis_direction,
                        rpm,
                        rpm_end,
                        ..
                    } => rot(
                        *axis_point,
                        *axis_direction,
                        rpm.abs().max(rpm_end.map_or(0.0, f64::abs)),
                    ),
                })
                .fold(0.0, f64::max),
        }
    }
}

impl BodyTransform {
    /// Turned by `theta` [rad] about the axis through `axis_point` along the unit vector `u`,
    /// turning at `omega` [rad/s]: x_w = R (x_b - p) + p, so T = p - R p.
    fn turned(axis_point: V3, u: V3, theta: f64, omega: V3) -> BodyTransform {
        let rotation = axis_angle_matrix(u, theta);
        BodyTransform {
            rotation,
            translation: vec3::sub(axis_point, vec3::mat_vec(&rotation, axis_point)),
            velocity: vec3::ZERO,
            omega,
            center: axis_point,
        }
    }

    /// The same pose with no velocity (a segment that has ended).
    pub fn at_rest(&self) -> BodyTransform {
        BodyTransform {
            velocity: vec3::ZERO,
            omega: vec3::ZERO,
            center: vec3::ZERO,
            ..*self
        }
    }

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
    use std::f64::consts::PI;

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

    /// Harmonic motions: in their own pose at t = 0, displaced by the sine, with the velocity
    /// the derivative of the position (central differences).
    #[test]
    fn harmonic_motions_start_in_place_and_move_as_their_sine() {
        let shake = Motion::Oscillation {
            amplitude: [0.01, 0.0, 0.002],
            frequency: 2.0,
            phase_deg: 0.0,
        };
        let roll = Motion::Rocking {
            axis_point: [0.3, 0.0, 0.0],
            axis_direction: [0.0, 1.0, 0.0],
            amplitude_deg: 4.0,
            frequency: 0.5,
            phase_deg: 90.0,
        };
        let p = [0.75, 0.02, 0.5];
        for m in [&shake, &roll] {
            assert!(!m.is_fixed());
            assert!(
                close(m.transform_at(0.0).apply(p), p, 1e-15),
                "{m:?} at t = 0"
            );
            for t in [0.0, 0.1, 0.37, 1.3] {
                let h = 1e-6;
                let x = m.transform_at(t).apply(p);
                let v = m.transform_at(t).wall_velocity(x);
                let fd = vec3::scale(
                    vec3::sub(
                        m.transform_at(t + h).apply(p),
                        m.transform_at(t - h).apply(p),
                    ),
                    0.5 / h,
                );
                assert!(close(v, fd, 1e-7), "{m:?} at t = {t}: v {v:?} fd {fd:?}");
                assert!(vec3::norm(v) <= m.max_speed(&[p]) * (1.0 + 1e-12));
            }
        }
        // A quarter period on: the full amplitude.
        let x = shake.transform_at(0.125).apply(p);
        assert!(close(x, [0.76, 0.02, 0.502], 1e-15));
        // Phase 90: at rest at t = 0, 2 amplitudes away half a period on (4 degrees twice).
        assert!(vec3::norm(roll.transform_at(0.0).omega) < 1e-15);
        let q = roll.transform_at(1.0).apply(p);
        let angle = (q[2]).atan2(q[0] - 0.3) - (0.5f64).atan2(0.45);
        assert!((angle.abs().to_degrees() - 8.0).abs() < 1e-9, "{angle}");
        let still = Motion::Oscillation {
            amplitude: [0.0; 3],
            frequency: 3.0,
            phase_deg: 0.0,
        };
        assert!(still.is_fixed());
    }

    fn close(a: V3, b: V3, tol: f64) -> bool {
        vec3::norm(vec3::sub(a, b)) <= tol
    }

    /// A drum that holds, spins up from 0 to 60 rpm over [1, 2) s, turns at 60 rpm to 3 s,
    /// then stops: the angle is the integral of the rate.
    #[test]
    fn ramped_rotation_integrates_the_rate() {
        let seg = |start, end: Option<f64>, rpm, rpm_end| Segment::Rotation {
            start,
            end,
            axis_point: [0.0; 3],
            axis_direction: [0.0, 0.0, 1.0],
            rpm,
            rpm_end,
        };
        let m = Motion::Schedule {
            segments: vec![
                Segment::Hold {
                    start: 0.0,
                    end: 1.0,
                },
                seg(1.0, Some(2.0), 0.0, Some(60.0)),
                seg(2.0, Some(3.0), 60.0, None),
            ],
        };
        let p = [1.0, 0.0, 0.0];
        let at = |t: f64| m.transform_at(t).apply(p);
        assert_eq!(m.transform_at(0.5), Motion::rest());
        assert_eq!(m.transform_at(1.0), Motion::rest());
        // Mid ramp: rate 30 rpm = pi rad/s; angle 0.5 * pi * 0.5 = pi/4.
        let mid = m.transform_at(1.5);
        assert!((mid.omega[2] - PI).abs() < 1e-12);
        assert!(close(
            at(1.5),
            [(PI / 4.0).cos(), (PI / 4.0).sin(), 0.0],
            1e-12
        ));
        // End of ramp: half a turn; then one more turn at 1 rev/s; then at rest.
        assert!(close(at(2.0), [-1.0, 0.0, 0.0], 1e-12));
        assert!(close(at(2.25), [0.0, -1.0, 0.0], 1e-12));
        assert!(close(at(3.0), [-1.0, 0.0, 0.0], 1e-12));
        let after = m.transform_at(7.0);
        assert!(close(after.apply(p), [-1.0, 0.0, 0.0], 1e-12));
        assert_eq!(after.omega, vec3::ZERO);
        assert!((m.max_speed(&[p]) - 2.0 * PI).abs() < 1e-12);
    }

    /// A body that moves up by 1 m and then turns about its own (body) axis: the axis has moved
    /// with it.
    #[test]
    fn rotation_axis_moves_with_the_body() {
        let m = Motion::Schedule {
            segments: vec![
                Segment::Translation {
                    start: 0.0,
                    end: Some(1.0),
                    velocity: [0.0, 0.0, 1.0],
                    velocity_end: None,
                },
                Segment::Rotation {
                    start: 1.0,
                    end: None,
                    axis_point: [1.0, 0.0, 0.0],
                    axis_direction: [0.0, 1.0, 0.0],
                    rpm: 15.0,
                    rpm_end: None,
                },
            ],
        };
        // After the lift, body point (2, 0, 0) is at (2, 0, 1); a quarter turn about the body
        // axis x = 1 (now at z = 1) brings it to (1, 0, 0) (right-hand rule about +y).
        let t = m.transform_at(2.0);
        assert!(close(t.apply([2.0, 0.0, 0.0]), [1.0, 0.0, 0.0], 1e-12));
        assert!(close(t.center, [1.0, 0.0, 1.0], 1e-12));
    }

    /// The velocity field of every pose is the time derivative of the pose (central
    /// differences), through ramps, holds and composed segments.
    #[test]
    fn wall_velocity_is_the_derivative_of_the_pose() {
        let m = Motion::Schedule {
            segments: vec![
                Segment::Translation {
                    start: 0.2,
                    end: Some(1.0),
                    velocity: [0.3, -0.1, 0.2],
                    velocity_end: Some([-0.5, 0.4, 0.0]),
                },
                Segment::Rotation {
                    start: 1.5,
                    end: Some(2.5),
                    axis_point: [0.1, 0.2, -0.3],
                    axis_direction: [1.0, 2.0, 3.0],
                    rpm: -20.0,
                    rpm_end: Some(45.0),
                },
                Segment::Rotation {
                    start: 2.5,
                    end: None,
                    axis_point: [0.0, 0.4, 0.0],
                    axis_direction: [0.0, 0.0, 1.0],
                    rpm: 30.0,
                    rpm_end: None,
                },
            ],
        };
        let body = [0.7, -0.2, 0.5];
        let h = 1e-6;
        for k in 0..60 {
            let t = 0.05 + 0.0571 * k as f64;
            let tr = m.transform_at(t);
            let p = tr.apply(body);
            let fd = vec3::scale(
                vec3::sub(
                    m.transform_at(t + h).apply(body),
                    m.transform_at(t - h).apply(body),
                ),
                0.5 / h,
            );
            assert!(
                close(tr.wall_velocity(p), fd, 1e-6),
                "t = {t}: field {:?}, derivative {fd:?}",
                tr.wall_velocity(p)
            );
        }
        // Poses are continuous at segment boundaries.
        for t in [0.2, 1.0, 1.5, 2.5] {
            let (a, b) = (m.transform_at(t - 1e-9), m.transform_at(t + 1e-9));
            assert!(close(a.apply(body), b.apply(body), 1e-7), "jump at t = {t}");
        }
    }
}
