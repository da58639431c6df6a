//! Orbit camera shared by the CPU rasteriser and the window: a target point, azimuth and
//! elevation around the chosen "up" axis, a distance, and a perspective projection.
//!
//! Conventions: right-handed world, the camera looks down its own -z axis (OpenGL style).
//! Azimuth 0 puts the camera on the +A side, 90 degrees on the +B side, where (A, B, Up) is
//! (x, y, z) for z-up, (z, x, y) for y-up and (y, z, x) for x-up (each a right-handed triple).

use std::fmt;
use std::str::FromStr;

pub type Vec3 = [f32; 3];

pub fn add(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}
pub fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}
pub fn scale(a: Vec3, s: f32) -> Vec3 {
    [a[0] * s, a[1] * s, a[2] * s]
}
pub fn dot(a: Vec3, b: Vec3) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
pub fn cross(a: Vec3, b: Vec3) -> Vec3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
pub fn normalize(a: Vec3) -> Vec3 {
    let l = dot(a, a).sqrt();
    if l > 0.0 {
        scale(a, 1.0 / l)
    } else {
        a
    }
}

/// Which world axis points up on screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum UpAxis {
    X,
    Y,
    #[default]
    Z,
}

impl UpAxis {
    /// (A, B, Up) unit vectors, a right-handed triple.
    pub fn basis(self) -> [Vec3; 3] {
        let (x, y, z) = ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]);
        match self {
            Self::Z => [x, y, z],
            Self::Y => [z, x, y],
            Self::X => [y, z, x],
        }
    }
}

impl FromStr for UpAxis {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "x" | "X" => Ok(Self::X),
            "y" | "Y" => Ok(Self::Y),
            "z" | "Z" => Ok(Self::Z),
            _ => Err(format!("up axis must be x, y or z, got {s:?}")),
        }
    }
}

/// Where to look from, as given on the command line: a preset or `az,el[,dist]` (degrees,
/// degrees, metres; without a distance the camera fits the world box).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CameraSpec {
    pub azimuth_deg: f32,
    pub elevation_deg: f32,
    pub distance: Option<f32>,
}

impl CameraSpec {
    pub const PRESETS: [(&'static str, CameraSpec); 5] = [
        ("iso", CameraSpec::new(-60.0, 25.0)),
        ("front", CameraSpec::new(-90.0, 0.0)),
        ("side", CameraSpec::new(0.0, 0.0)),
        ("top", CameraSpec::new(-90.0, 89.0)),
        ("back", CameraSpec::new(90.0, 0.0)),
    ];
    const fn new(azimuth_deg: f32, elevation_deg: f32) -> Self {
        Self {
            azimuth_deg,
            elevation_deg,
            distance: None,
        }
    }
}

impl Default for CameraSpec {
    fn default() -> Self {
        Self::PRESETS[0].1
    }
}

impl FromStr for CameraSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some((_, p)) = Self::PRESETS.iter().find(|(n, _)| *n == s) {
            return Ok(*p);
        }
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        let num = |w: &str| -> Result<f32, String> {
            w.parse::<f32>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("camera: {w:?} is not a number"))
        };
        let names: Vec<&str> = Self::PRESETS.iter().map(|(n, _)| *n).collect();
        match parts.as_slice() {
            [az, el] | [az, el, _] => {
                let distance = match parts.get(2) {
                    Some(d) if *d != "auto" => {
                        let d = num(d)?;
                        if d <= 0.0 {
                            return Err(format!("camera distance must be > 0, got {d}"));
                        }
                        Some(d)
                    }
                    _ => None,
                };
                Ok(Self {
                    azimuth_deg: num(az)?,
                    elevation_deg: num(el)?.clamp(-89.0, 89.0),
                    distance,
                })
            }
            _ => Err(format!(
                "camera must be AZ,EL[,DIST] in degrees/metres or one of {}; got {s:?}",
                names.join(", ")
            )),
        }
    }
}

impl fmt::Display for CameraSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.azimuth_deg, self.elevation_deg)?;
        if let Some(d) = self.distance {
            write!(f, ",{d}")?;
        }
        Ok(())
    }
}

/// An axis-aligned box [m].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub min: Vec3,
    pub max: Vec3,
}

impl Bounds {
    pub fn center(&self) -> Vec3 {
        scale(add(self.min, self.max), 0.5)
    }
    pub fn radius(&self) -> f32 {
        let d = sub(self.max, self.min);
        (0.5 * dot(d, d).sqrt()).max(1e-6)
    }
    pub fn corners(&self) -> [Vec3; 8] {
        let (a, b) = (self.min, self.max);
        std::array::from_fn(|i| {
            [
                if i & 1 == 0 { a[0] } else { b[0] },
                if i & 2 == 0 { a[1] } else { b[1] },
                if i & 4 == 0 { a[2] } else { b[2] },
            ]
        })
    }
    /// The 12 edges as corner index pairs.
    pub const EDGES: [(usize, usize); 12] = [
        (0, 1),
        (2, 3),
        (4, 5),
        (6, 7),
        (0, 2),
        (1, 3),
        (4, 6),
        (5, 7),
        (0, 4),
        (1, 5),
        (2, 6),
        (3, 7),
    ];
}

/// The orbit camera.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub target: Vec3,
    pub azimuth_deg: f32,
    pub elevation_deg: f32,
    pub distance: f32,
    /// Vertical field of view [degrees].
    pub fov_y_deg: f32,
    pub up: UpAxis,
}

impl Camera {
    /// A camera looking at `bounds` from `spec`, far enough for the box to fit `aspect` (w/h).
    pub fn framing(bounds: &Bounds, spec: &CameraSpec, up: UpAxis, aspect: f32) -> Self {
        let mut cam = Self {
            target: bounds.center(),
            azimuth_deg: spec.azimuth_deg,
            elevation_deg: spec.elevation_deg.clamp(-89.0, 89.0),
            distance: 1.0,
            fov_y_deg: 35.0,
            up,
        };
        cam.distance = spec
            .distance
            .unwrap_or_else(|| cam.fit_distance(bounds, aspect));
        cam
    }

    /// Distance at which the bounding sphere of `bounds` fits the narrower field of view.
    pub fn fit_distance(&self, bounds: &Bounds, aspect: f32) -> f32 {
        let half_y = (self.fov_y_deg.to_radians() * 0.5).tan();
        let half = half_y.min(half_y * aspect.max(1e-3));
        // A sphere of radius r fits a cone of half-angle a at distance r / sin(a).
        let a = half.atan();
        bounds.radius() / a.sin() * 1.02
    }

    pub fn eye(&self) -> Vec3 {
        let [a, b, u] = self.up.basis();
        let (az, el) = (
            self.azimuth_deg.to_radians(),
            self.elevation_deg.to_radians(),
        );
        let dir = add(
            add(scale(a, el.cos() * az.cos()), scale(b, el.cos() * az.sin())),
            scale(u, el.sin()),
        );
        add(self.target, scale(dir, self.distance))
    }

    /// Camera basis in world coordinates: (right, up, back) where "back" points at the eye.
    pub fn basis(&self) -> [Vec3; 3] {
        let back = normalize(sub(self.eye(), self.target));
        let up_world = self.up.basis()[2];
        let right = normalize(cross(up_world, back));
        let up = cross(back, right);
        [right, up, back]
    }

    /// World-to-view transform as a column-major 4x4 matrix (OpenGL layout).
    pub fn view_matrix(&self) -> [f32; 16] {
        let [r, u, b] = self.basis();
        let e = self.eye();
        [
            r[0],
            u[0],
            b[0],
            0.0,
            r[1],
            u[1],
            b[1],
            0.0,
            r[2],
            u[2],
            b[2],
            0.0,
            -dot(r, e),
            -dot(u, e),
            -dot(b, e),
            1.0,
        ]
    }

    /// Near and far planes that enclose `bounds` seen from here.
    pub fn clip_range(&self, bounds: &Bounds) -> (f32, f32) {
        let d = dot(
            sub(bounds.center(), self.eye()),
            scale(self.basis()[2], -1.0),
        );
        let r = bounds.radius() * 1.5;
        let far = (d + r).max(1e-3);
        let near = (d - r).max(far * 1e-4);
        (near, far)
    }

    /// Perspective projection, column-major (OpenGL clip space, depth -1..1).
    pub fn projection_matrix(&self, aspect: f32, near: f32, far: f32) -> [f32; 16] {
        let f = 1.0 / (self.fov_y_deg.to_radians() * 0.5).tan();
        let mut m = [0.0; 16];
        m[0] = f / aspect;
        m[5] = f;
        m[10] = (far + near) / (near - far);
        m[11] = -1.0;
        m[14] = 2.0 * far * near / (near - far);
        m
    }

    /// Moves the target in the view plane by a screen-space fraction of the view height.
    pub fn pan(&mut self, dx_frac: f32, dy_frac: f32) {
        let [r, u, _] = self.basis();
        let h = 2.0 * self.distance * (self.fov_y_deg.to_radians() * 0.5).tan();
        self.target = add(
            self.target,
            add(scale(r, -dx_frac * h), scale(u, dy_frac * h)),
        );
    }

    pub fn orbit(&mut self, d_az_deg: f32, d_el_deg: f32) {
        self.azimuth_deg = (self.azimuth_deg + d_az_deg).rem_euclid(360.0);
        self.elevation_deg = (self.elevation_deg + d_el_deg).clamp(-89.0, 89.0);
    }

    pub fn zoom(&mut self, factor: f32) {
        self.distance = (self.distance * factor).max(1e-6);
    }
}

/// Transforms a point by a column-major 4x4 matrix (w = 1), returning (x, y, z, w).
pub fn transform(m: &[f32; 16], p: Vec3) -> [f32; 4] {
    std::array::from_fn(|row| m[row] * p[0] + m[4 + row] * p[1] + m[8 + row] * p[2] + m[12 + row])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_presets_and_angles() {
        assert_eq!("front".parse::<CameraSpec>(), Ok(CameraSpec::PRESETS[1].1));
        let c: CameraSpec = "30,20,5".parse().expect("valid");
        assert_eq!(c.distance, Some(5.0));
        assert!("30".parse::<CameraSpec>().is_err());
        assert!("a,b".parse::<CameraSpec>().is_err());
        assert!("1,2,-3".parse::<CameraSpec>().is_err());
    }

    #[test]
    fn front_view_looks_along_plus_y_with_z_up() {
        let b = Bounds {
            min: [0.0; 3],
            max: [1.0; 3],
        };
        let cam = Camera::framing(&b, &"front".parse().expect("preset"), UpAxis::Z, 1.0);
        let v = cam.view_matrix();
        // A point at +x appears to the right, +z above, and the target straight ahead.
        let c = transform(&v, b.center());
        let px = transform(&v, add(b.center(), [0.1, 0.0, 0.0]));
        let pz = transform(&v, add(b.center(), [0.0, 0.0, 0.1]));
        assert!(c[0].abs() < 1e-5 && c[1].abs() < 1e-5 && c[2] < 0.0);
        assert!(px[0] > c[0] + 0.09);
        assert!(pz[1] > c[1] + 0.09);
    }
}
