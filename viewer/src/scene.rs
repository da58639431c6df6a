//! What gets drawn, independent of the renderer: particles (centre, radius, colour) after
//! subsampling and clipping, mesh triangles in world coordinates, and the world box.

use shm_protocol::{BodyTransform, Frame, StaticData};

use crate::camera::{Bounds, Vec3};
use crate::color::{color_particles, ColorBy, ColorChoice, Legend, Rgb};
use crate::elements::Elements;
use crate::sph::{self, BoundaryMode};

/// Keeps the particles on one side of an axis-aligned plane (to see inside a bed).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClipPlane {
    /// 0 = x, 1 = y, 2 = z.
    pub axis: usize,
    /// Plane position as a fraction of the world box along `axis` (0..1).
    pub fraction: f32,
    /// Keep the side with coordinates above the plane instead of below.
    pub keep_above: bool,
}

/// How to turn a frame into a scene.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SceneOptions {
    /// `Auto`: species for DEM runs, pressure for SPH runs.
    pub color_by: ColorChoice,
    /// Draw at most this many particles (every k-th particle beyond it); hidden boundary
    /// particles do not count.
    pub max_particles: usize,
    pub clip: Option<ClipPlane>,
    /// How SPH boundary particles are drawn (no effect on other runs).
    pub boundary: BoundaryMode,
}

impl Default for SceneOptions {
    fn default() -> Self {
        Self {
            color_by: ColorChoice::Auto,
            max_particles: usize::MAX,
            clip: None,
            boundary: BoundaryMode::Hidden,
        }
    }
}

/// A renderable scene.
#[derive(Clone, Debug)]
pub struct Scene {
    pub centers: Vec<Vec3>,
    pub radii: Vec<f32>,
    pub colors: Vec<Rgb>,
    /// Mesh triangles in world coordinates.
    pub triangles: Vec<[Vec3; 3]>,
    pub world: Bounds,
    pub legend: Legend,
    /// The colouring used (`SceneOptions::color_by` resolved for this run).
    pub color_by: ColorBy,
    /// Particles in the frame, before subsampling and clipping: the frame's own count (fewer
    /// than the static section lists in a run whose particle set changes).
    pub total_particles: usize,
    /// SPH boundary particles in the frame, and how they were drawn.
    pub boundary_particles: usize,
    pub boundary: BoundaryMode,
    /// Subsampling stride used (1 = all).
    pub stride: usize,
    pub note: Option<String>,
}

/// `x_world = R x_body + t` with R row-major.
pub fn apply(t: &BodyTransform, p: &[f32]) -> Vec3 {
    let r = &t.rotation;
    std::array::from_fn(|i| {
        r[3 * i] * p[0] + r[3 * i + 1] * p[1] + r[3 * i + 2] * p[2] + t.translation[i]
    })
}

/// World box from the static section, or from the positions when the solver gave none.
fn world_bounds(st: &StaticData, positions: &[Vec3]) -> Bounds {
    let min = st.world_min.map(|v| v as f32);
    let max = st.world_max.map(|v| v as f32);
    if (0..3).all(|k| max[k] > min[k] && min[k].is_finite() && max[k].is_finite()) {
        return Bounds { min, max };
    }
    let mut b = Bounds {
        min: [f32::INFINITY; 3],
        max: [f32::NEG_INFINITY; 3],
    };
    for p in positions.iter().filter(|p| p.iter().all(|v| v.is_finite())) {
        b.min = std::array::from_fn(|k| b.min[k].min(p[k]));
        b.max = std::array::from_fn(|k| b.max[k].max(p[k]));
    }
    if b.min[0] > b.max[0] {
        return Bounds {
            min: [0.0; 3],
            max: [1.0; 3],
        };
    }
    b
}

/// Radius of element `i`: its own, else its species', else a small fraction of the box.
fn radius_of(st: &StaticData, el: &Elements<'_>, i: usize, fallback: f32) -> f32 {
    if let Some(&r) = el.radii.get(i) {
        if r > 0.0 && r.is_finite() {
            return r;
        }
    }
    el.species
        .get(i)
        .and_then(|&s| st.species.get(s as usize))
        .map(|s| s.radius as f32)
        .filter(|r| *r > 0.0 && r.is_finite())
        .unwrap_or(fallback)
}

fn mesh_triangles(st: &StaticData, frame: &Frame) -> Vec<[Vec3; 3]> {
    let mut out = Vec::new();
    for (k, mesh) in st.meshes.iter().enumerate() {
        let t = frame.bodies.get(k).unwrap_or(&BodyTransform::IDENTITY);
        out.extend(mesh.triangles.iter().map(|tri| {
            [
                apply(t, &tri[0..3]),
                apply(t, &tri[3..6]),
                apply(t, &tri[6..9]),
            ]
        }));
    }
    out
}

impl Scene {
    pub fn build(st: &StaticData, frame: &Frame, opts: &SceneOptions) -> Scene {
        let positions: &[Vec3] = frame.positions.as_deref().unwrap_or(&[]);
        let n = positions.len();
        let world = world_bounds(st, positions);
        // Frames of a run whose particle set changes hold fewer particles than the static
        // section, and element i is the particle named by its id: map species and radii.
        let el = Elements::of(st, frame);
        let color_by = opts.color_by.resolve_for(sph::is_sph(st, frame), frame);
        let boundary = sph::boundary_mask(st, &el, frame, n);
        let boundary_count = boundary
            .as_ref()
            .map_or(0, |b| b.iter().filter(|&&x| x).count());
        // Boundary particles drawn dimmed or not at all do not stretch the colour range.
        let exclude = boundary
            .as_deref()
            .filter(|_| opts.boundary != BoundaryMode::Shown);
        let coloring = color_particles(color_by, st, &el, frame, n, exclude);
        let is_boundary = |i: usize| boundary.as_ref().is_some_and(|b| b[i]);
        let hidden = |i: usize| opts.boundary == BoundaryMode::Hidden && is_boundary(i);
        let drawable = if opts.boundary == BoundaryMode::Hidden {
            n - boundary_count
        } else {
            n
        };
        let stride = drawable.div_ceil(opts.max_particles.max(1)).max(1);
        let fallback = world.radius() * 0.005;
        let clip = opts.clip.map(|c| {
            let axis = c.axis.min(2);
            let at = world.min[axis] + c.fraction * (world.max[axis] - world.min[axis]);
            (axis, at, c.keep_above)
        });
        let keep = |p: &Vec3| match clip {
            Some((axis, at, above)) => (p[axis] >= at) == above,
            None => true,
        };
        let cap = drawable / stride + 1;
        let (mut centers, mut radii, mut colors) = (
            Vec::with_capacity(cap),
            Vec::with_capacity(cap),
            Vec::with_capacity(cap),
        );
        // Every `stride`-th of the particles that can be drawn (hidden ones are skipped before
        // counting, so subsampling thins the fluid, not the walls).
        let mut k = 0usize;
        for (i, &p) in positions.iter().enumerate() {
            if hidden(i) {
                continue;
            }
            let take = k.is_multiple_of(stride);
            k += 1;
            if !take {
                continue;
            }
            if !p.iter().all(|v| v.is_finite()) || !keep(&p) {
                continue;
            }
            let r = radius_of(st, &el, i, fallback);
            centers.push(p);
            if opts.boundary == BoundaryMode::Dimmed && is_boundary(i) {
                radii.push(r * sph::DIMMED_RADIUS);
                colors.push(sph::DIMMED_COLOR);
            } else {
                radii.push(r);
                colors.push(coloring.colors[i]);
            }
        }
        Scene {
            centers,
            radii,
            colors,
            triangles: mesh_triangles(st, frame),
            world,
            legend: coloring.legend,
            color_by,
            // A frame the forwarder sampled (`--connect`): counts of the run's whole frame.
            total_particles: frame.sample.map_or(n, |s| s.of as usize),
            boundary_particles: boundary_count,
            boundary: opts.boundary,
            stride: stride * frame.sample.map_or(1, |s| s.stride as usize),
            note: match (el.problem, coloring.note) {
                (Some(a), Some(b)) => Some(format!("{a}; {b}")),
                (a, b) => a.or(b),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_transform_rotates_then_translates() {
        let mut t = BodyTransform::IDENTITY;
        // 90 degrees about z: x -> y.
        t.rotation = [0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        t.translation = [1.0, 2.0, 3.0];
        assert_eq!(apply(&t, &[1.0, 0.0, 0.0]), [1.0, 3.0, 3.0]);
    }

    #[test]
    fn subsampling_and_clipping() {
        let st = StaticData {
            particle_radius: vec![0.1; 10],
            particle_species: vec![0; 10],
            world_min: [0.0; 3],
            world_max: [10.0; 3],
            ..Default::default()
        };
        let frame = Frame {
            positions: Some((0..10).map(|i| [i as f32, 1.0, 1.0]).collect()),
            ..Default::default()
        };
        let opts = SceneOptions {
            max_particles: 5,
            ..Default::default()
        };
        let s = Scene::build(&st, &frame, &opts);
        assert_eq!((s.stride, s.centers.len()), (2, 5));
        let opts = SceneOptions {
            clip: Some(ClipPlane {
                axis: 0,
                fraction: 0.5,
                keep_above: false,
            }),
            ..Default::default()
        };
        assert_eq!(Scene::build(&st, &frame, &opts).centers.len(), 5);
    }

    #[test]
    fn a_frame_of_fewer_particles_draws_them_by_id() {
        let (mut st, frame) = crate::elements::tests::five_and_three();
        st.world_max = [1.0; 3];
        let s = Scene::build(&st, &frame, &SceneOptions::default());
        assert_eq!((s.total_particles, s.centers.len()), (3, 3));
        // Ids 1, 3, 4: radii 2, 4, 5 mm and species 1, 1, 0.
        assert_eq!(s.radii, [0.002, 0.004, 0.005]);
        let c = crate::color::species_color;
        assert_eq!(s.colors, [c(1), c(1), c(0)]);
        assert!(s.note.is_none(), "{:?}", s.note);
    }

    /// A frame the forwarder sampled (every 4th of 12 particles, named by id): drawn by id,
    /// counted as the run's whole frame, the forwarder's stride times the scene's own.
    #[test]
    fn a_frame_sampled_by_the_forwarder_counts_the_whole_run() {
        let st = StaticData {
            particle_radius: (1..=12).map(|i| i as f32 / 64.0).collect(),
            particle_species: vec![0; 12],
            particle_ids: (0..12).collect(),
            world_min: [0.0; 3],
            world_max: [12.0; 3],
            ..Default::default()
        };
        let frame = Frame {
            positions: Some((0..3).map(|i| [4.0 * i as f32, 1.0, 1.0]).collect()),
            particle_ids: Some(vec![0, 4, 8]),
            sample: Some(shm_protocol::FrameSample { stride: 4, of: 12 }),
            ..Default::default()
        };
        let s = Scene::build(&st, &frame, &SceneOptions::default());
        assert_eq!((s.total_particles, s.stride, s.centers.len()), (12, 4, 3));
        assert_eq!(s.radii, [1.0 / 64.0, 5.0 / 64.0, 9.0 / 64.0]);
        let opts = SceneOptions {
            max_particles: 2,
            ..Default::default()
        };
        let s = Scene::build(&st, &frame, &opts);
        assert_eq!((s.total_particles, s.stride, s.centers.len()), (12, 8, 2));
    }

    #[test]
    fn an_unknown_id_draws_with_defaults_and_a_note() {
        let (st, mut frame) = crate::elements::tests::five_and_three();
        frame.particle_ids = Some(vec![1, 3, 5]);
        let s = Scene::build(&st, &frame, &SceneOptions::default());
        assert_eq!(s.centers.len(), 3);
        assert!(s
            .note
            .as_deref()
            .is_some_and(|n| n.contains("particle id 5")));
    }

    /// Five SPH particles in a row along x (1/8 apart): fluid, boundary, fluid, boundary, fluid (kinds in
    /// the frame), pressures 0, 1e6, 100, 1e6, 200 Pa.
    fn sph_row() -> (StaticData, Frame) {
        let st = crate::sph::tests::sph_static(&[0, 1, 0, 1, 0]);
        let mut frame = Frame {
            positions: Some((1..6).map(|i| [0.125 * i as f32, 0.5, 0.5]).collect()),
            pressures: Some(vec![0.0, 1e6, 100.0, 1e6, 200.0]),
            particle_kinds: Some(vec![1, 2, 1, 2, 1]),
            ..Default::default()
        };
        frame.meta.particle_count = 5;
        (st, frame)
    }

    #[test]
    fn sph_boundary_is_hidden_by_default_and_pressure_colours_the_fluid() {
        let (st, frame) = sph_row();
        let s = Scene::build(&st, &frame, &SceneOptions::default());
        assert_eq!(s.color_by, ColorBy::Pressure);
        assert_eq!((s.boundary_particles, s.centers.len()), (2, 3));
        assert!(s
            .centers
            .iter()
            .all(|c| [0.125f32, 0.375, 0.625].contains(&c[0])));
        // The range is the fluid's, 0..200 Pa: the walls' 1 MPa does not flatten it.
        assert!(matches!(s.legend, Legend::Ramp { min, max, .. } if min == 0.0 && max == 200.0));
        let v = crate::color::viridis;
        assert_eq!(s.colors, [v(0.0), v(0.5), v(1.0)]);
    }

    #[test]
    fn dimmed_boundary_is_small_and_grey_and_shown_is_coloured() {
        let (st, frame) = sph_row();
        let dimmed = SceneOptions {
            boundary: BoundaryMode::Dimmed,
            ..Default::default()
        };
        let s = Scene::build(&st, &frame, &dimmed);
        assert_eq!(s.centers.len(), 5);
        assert_eq!(s.colors[1], sph::DIMMED_COLOR);
        assert_eq!(s.radii[1], 0.01 * sph::DIMMED_RADIUS);
        assert_eq!(s.radii[0], 0.01);
        assert!(matches!(s.legend, Legend::Ramp { max, .. } if max == 200.0));
        let shown = SceneOptions {
            boundary: BoundaryMode::Shown,
            ..Default::default()
        };
        let s = Scene::build(&st, &frame, &shown);
        assert_eq!(s.radii, [0.01; 5]);
        assert!(matches!(s.legend, Legend::Ramp { max, .. } if max == 1e6));
        assert_eq!(s.colors[1], crate::color::viridis(1.0));
    }

    #[test]
    fn subsampling_counts_only_the_particles_that_can_be_drawn() {
        let (st, frame) = sph_row();
        let opts = SceneOptions {
            max_particles: 2,
            ..Default::default()
        };
        // Three fluid particles, at most two drawn: every second fluid particle (x = 1/8, 5/8).
        let s = Scene::build(&st, &frame, &opts);
        assert_eq!(s.stride, 2);
        assert_eq!(
            s.centers.iter().map(|c| c[0]).collect::<Vec<_>>(),
            [0.125, 0.625]
        );
    }
}
