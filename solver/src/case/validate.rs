//! Field-by-field validation of a [`Case`]; every message names the field and the bad value.

use super::{Case, CaseError, CaseWarning, ContactModelSpec, Source, WallMaterial};
use crate::geometry::Motion;

/// Collects the first error with a field path.
struct Checker<'a> {
    origin: &'a str,
}

impl Checker<'_> {
    fn fail(&self, field: impl Into<String>, message: String) -> CaseError {
        CaseError::Invalid {
            origin: self.origin.to_string(),
            field: field.into(),
            message,
        }
    }

    fn positive(&self, field: impl Into<String>, v: f64) -> Result<(), CaseError> {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(self.fail(field, format!("must be > 0, got {v}")))
        }
    }

    fn non_negative(&self, field: impl Into<String>, v: f64) -> Result<(), CaseError> {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(self.fail(field, format!("must be >= 0, got {v}")))
        }
    }

    fn finite3(&self, field: impl Into<String>, v: [f64; 3]) -> Result<(), CaseError> {
        if v.iter().all(|c| c.is_finite()) {
            Ok(())
        } else {
            Err(self.fail(field, format!("must be finite, got {v:?}")))
        }
    }

    fn in_range(
        &self,
        field: impl Into<String>,
        v: f64,
        lo: f64,
        hi: f64,
        what: &str,
    ) -> Result<(), CaseError> {
        if v.is_finite() && v > lo && v <= hi {
            Ok(())
        } else {
            Err(self.fail(field, format!("must be {what}, got {v}")))
        }
    }

    fn boxed(&self, field: &str, min: [f64; 3], max: [f64; 3]) -> Result<(), CaseError> {
        self.finite3(format!("{field}.min"), min)?;
        self.finite3(format!("{field}.max"), max)?;
        for a in 0..3 {
            if max[a] <= min[a] {
                return Err(self.fail(
                    format!("{field}.max"),
                    format!("must exceed {field}.min on every axis, got min {min:?}, max {max:?}"),
                ));
            }
        }
        Ok(())
    }

    fn material(&self, field: &str, m: &WallMaterial, hertz: bool) -> Result<(), CaseError> {
        self.common(
            field,
            m.young_modulus,
            m.normal_stiffness,
            m.poisson_ratio,
            m.restitution,
            m.sliding_friction,
            m.rolling_friction,
        )?;
        if hertz && m.young_modulus.is_none() {
            return Err(self.fail(
                format!("{field}.young_modulus"),
                "is required by contact_model \"hertz_mindlin\"".into(),
            ));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn common(
        &self,
        field: &str,
        e: Option<f64>,
        k: Option<f64>,
        nu: f64,
        rest: f64,
        mu: f64,
        mu_r: f64,
    ) -> Result<(), CaseError> {
        if let Some(e) = e {
            self.positive(format!("{field}.young_modulus"), e)?;
        }
        if let Some(k) = k {
            self.positive(format!("{field}.normal_stiffness"), k)?;
        }
        if !(nu.is_finite() && nu > -1.0 && nu < 0.5) {
            return Err(self.fail(
                format!("{field}.poisson_ratio"),
                format!("must be in (-1, 0.5), got {nu}"),
            ));
        }
        self.in_range(format!("{field}.restitution"), rest, 0.0, 1.0, "in (0, 1]")?;
        self.non_negative(format!("{field}.sliding_friction"), mu)?;
        self.non_negative(format!("{field}.rolling_friction"), mu_r)
    }
}

impl Case {
    /// Checks every field, loads meshes, places the particles (checking initial overlaps) and runs
    /// the time-step stability check. Returns warnings that do not prevent a run.
    pub fn validate(&self) -> Result<Vec<CaseWarning>, CaseError> {
        self.validate_fields()?;
        let meshes = self.load_meshes()?;
        let particles = self.generate_particles()?;
        self.check_initial_overlaps(&particles)?;
        let report = self.stability(&particles, &meshes)?;
        Ok(report.warning.into_iter().collect())
    }

    /// Checks the scalar fields only (no file access, no particle placement).
    pub fn validate_fields(&self) -> Result<(), CaseError> {
        let c = Checker {
            origin: &self.origin.name,
        };
        c.positive("dt", self.dt)?;
        c.positive("end_time", self.end_time)?;
        c.finite3("gravity", self.gravity)?;
        c.boxed("domain", self.domain.min, self.domain.max)?;
        if self.reorder_every == 0 {
            return Err(c.fail("reorder_every", "must be > 0, got 0".into()));
        }
        let hertz = matches!(self.contact_model, ContactModelSpec::HertzMindlin {});
        if let ContactModelSpec::Linear {
            tangential_stiffness_ratio,
        } = self.contact_model
        {
            c.non_negative(
                "contact_model.tangential_stiffness_ratio",
                tangential_stiffness_ratio,
            )?;
        }
        if self.species.is_empty() {
            return Err(c.fail("species", "must list at least one species".into()));
        }
        for (i, s) in self.species.iter().enumerate() {
            let f = format!("species[{i}]");
            if s.name.is_empty() {
                return Err(c.fail(format!("{f}.name"), "must not be empty".into()));
            }
            if self.species[..i].iter().any(|o| o.name == s.name) {
                return Err(c.fail(
                    format!("{f}.name"),
                    format!("\"{}\" is used by an earlier species", s.name),
                ));
            }
            c.positive(format!("{f}.radius"), s.radius)?;
            c.positive(format!("{f}.density"), s.density)?;
            c.common(
                &f,
                s.young_modulus,
                s.normal_stiffness,
                s.poisson_ratio,
                s.restitution,
                s.sliding_friction,
                s.rolling_friction,
            )?;
            if hertz && s.young_modulus.is_none() {
                return Err(c.fail(
                    format!("{f}.young_modulus"),
                    "is required by contact_model \"hertz_mindlin\"".into(),
                ));
            }
            if !hertz && s.young_modulus.is_none() && s.normal_stiffness.is_none() {
                return Err(c.fail(
                    f,
                    "needs `normal_stiffness` or `young_modulus` for the linear contact model"
                        .into(),
                ));
            }
        }
        c.material("wall_material", &self.wall_material, hertz)?;
        for (k, src) in self.sources.iter().enumerate() {
            let f = format!("sources[{k}]");
            let (species, min, max, velocity) = match src {
                Source::Grid {
                    species,
                    min,
                    max,
                    spacing,
                    count,
                    jitter,
                    velocity,
                    ..
                } => {
                    c.positive(format!("{f}.spacing"), *spacing)?;
                    if *count == Some(0) {
                        return Err(c.fail(format!("{f}.count"), "must be > 0, got 0".into()));
                    }
                    if !(jitter.is_finite() && (0.0..=1.0).contains(jitter)) {
                        return Err(c.fail(
                            format!("{f}.jitter"),
                            format!("must be in [0, 1], got {jitter}"),
                        ));
                    }
                    if let Some(i) = self.species_index(species) {
                        let d = 2.0 * self.species[i].radius;
                        if *spacing < d {
                            return Err(c.fail(format!("{f}.spacing"), format!("must be >= the diameter {d} of species \"{species}\", got {spacing}")));
                        }
                    }
                    (species, min, max, velocity)
                }
                Source::RandomBox {
                    species,
                    min,
                    max,
                    count,
                    velocity,
                    ..
                } => {
                    if *count == 0 {
                        return Err(c.fail(format!("{f}.count"), "must be > 0, got 0".into()));
                    }
                    (species, min, max, velocity)
                }
            };
            if self.species_index(species).is_none() {
                return Err(c.fail(
                    format!("{f}.species"),
                    format!("names unknown species \"{species}\""),
                ));
            }
            c.boxed(&f, *min, *max)?;
            c.finite3(format!("{f}.velocity"), *velocity)?;
        }
        for (k, m) in self.meshes.iter().enumerate() {
            let f = format!("meshes[{k}]");
            if self.meshes[..k].iter().any(|o| o.name == m.name) {
                return Err(c.fail(
                    format!("{f}.name"),
                    format!("\"{}\" is used by an earlier mesh", m.name),
                ));
            }
            c.positive(format!("{f}.scale"), m.scale)?;
            if let Some(mat) = &m.material {
                c.material(&format!("{f}.material"), mat, hertz)?;
            }
            match &m.motion {
                Motion::Fixed => {}
                Motion::Translation { velocity } => {
                    c.finite3(format!("{f}.motion.velocity"), *velocity)?
                }
                Motion::Rotation {
                    axis_point,
                    axis_direction,
                    rpm,
                } => {
                    c.finite3(format!("{f}.motion.axis_point"), *axis_point)?;
                    c.finite3(format!("{f}.motion.axis_direction"), *axis_direction)?;
                    if crate::vec3::norm(*axis_direction) == 0.0 {
                        return Err(c.fail(
                            format!("{f}.motion.axis_direction"),
                            "must not be the zero vector".into(),
                        ));
                    }
                    if !rpm.is_finite() {
                        return Err(c.fail(
                            format!("{f}.motion.rpm"),
                            format!("must be finite, got {rpm}"),
                        ));
                    }
                }
            }
        }
        if let Some(v) = self.output.vtk_interval {
            c.positive("output.vtk_interval", v)?;
        }
        if let Some(v) = self.output.checkpoint_interval {
            c.positive("output.checkpoint_interval", v)?;
        }
        Ok(())
    }
}
