//! The built-in default case: the XPS falling-box benchmark (Neubauer 2018, chapter 6).

use super::{
    Case, CaseOrigin, ContactModelSpec, Domain, Integrator, Output, Source, Species, WallMaterial,
    Walls,
};
use crate::dem::physics;

impl Case {
    /// XPS benchmark: N spheres on a (jittered) lattice filling a 2 m cube, falling under gravity
    /// (-9.81 m/s^2 along z) onto the box floor; dt = 1e-5 s, end time 1 s, linear
    /// spring-dashpot. See [`Case::falling_box`].
    pub fn default_falling_box(n_particles: usize) -> Case {
        Self::falling_box(n_particles, 1e-5)
    }

    /// The falling box with time step `dt`.
    ///
    /// * Diameter d = 0.9 cbrt(8 m^3 / N) (the box volume shared equally, 10% gap), reduced to
    ///   0.95 of the lattice spacing when N is so small that the lattice (ceil(cbrt N) sites per
    ///   axis) is coarser.
    /// * Glass-like material: density 2500 kg/m^3, e = 0.5, sliding friction 0.5, rolling
    ///   friction 0.02.
    /// * Normal stiffness chosen so that a particle-particle contact lasts 50 time steps
    ///   (k = m* pi^2 / (t_c^2 (1 - beta^2)), inverting [`physics::linear_contact_time`]); this
    ///   keeps the same resolution of contacts for any N, as a user tuning XPS would.
    /// * Lattice jitter 0.5 (seed 1), so the columns are not perfectly stacked.
    pub fn falling_box(n_particles: usize, dt: f64) -> Case {
        let n = n_particles.max(1);
        let per_axis = (n as f64).cbrt().ceil().max(1.0);
        let spacing = 2.0 / per_axis;
        let diameter = (0.9 * (8.0 / n as f64).cbrt()).min(0.95 * spacing);
        let radius = 0.5 * diameter;
        let density = 2500.0;
        let restitution = 0.5;
        let m_eff = 0.5 * physics::sphere_mass(radius, density);
        let beta = physics::damping_ratio_from_restitution(restitution);
        let tc = 50.0 * dt;
        let kn = m_eff * std::f64::consts::PI.powi(2) / (tc * tc * (1.0 - beta * beta));
        Case {
            version: 1,
            method: Default::default(),
            dt,
            end_time: 1.0,
            gravity: [0.0, 0.0, -9.81],
            domain: Domain {
                min: [0.0; 3],
                max: [2.0; 3],
                walls: Walls::ALL,
                face_materials: Default::default(),
            },
            contact_model: ContactModelSpec::Linear {
                tangential_stiffness_ratio: 2.0 / 7.0,
                rolling_radius: Default::default(),
            },
            integrator: Integrator::SymplecticEuler,
            reorder_every: 100,
            species: vec![Species {
                name: "glass".into(),
                radius,
                density,
                young_modulus: None,
                normal_stiffness: Some(kn),
                poisson_ratio: 0.25,
                restitution,
                sliding_friction: 0.5,
                rolling_friction: 0.02,
            }],
            wall_material: WallMaterial {
                young_modulus: None,
                normal_stiffness: Some(kn),
                poisson_ratio: 0.25,
                restitution,
                sliding_friction: 0.5,
                rolling_friction: 0.02,
            },
            interactions: Vec::new(),
            sources: vec![Source::Grid {
                species: "glass".into(),
                min: [0.0; 3],
                max: [2.0; 3],
                spacing,
                count: Some(n_particles),
                jitter: 0.5,
                seed: 1,
                velocity: [0.0; 3],
                shape: None,
            }],
            meshes: Vec::new(),
            inflows: Vec::new(),
            outflows: Vec::new(),
            output: Output::default(),
            decomposition: Default::default(),
            origin: CaseOrigin {
                name: format!("<built-in falling box of {n_particles} particles>"),
                base_dir: Default::default(),
            },
        }
    }
}
