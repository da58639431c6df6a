//! Field-by-field validation of a [`Case`]; every message names the field and the bad value.
//! The ranges are documented in [`super::ranges`].

use super::ranges::{self, Range};
use super::{
    Case, CaseError, CaseWarning, ContactModelSpec, FractionBasis, Shape, Source, SpeciesChoice,
    WallMaterial,
};
use crate::core::geometry::{Motion, Segment};
use crate::core::vec3;

/// Checks a prescribed motion as a DEM mesh's is checked (the SPH solids take the same syntax):
/// `Err((field, message))` naming the bad field under `field`.
pub fn check_motion(field: &str, motion: &Motion) -> Result<(), (String, String)> {
    let c = Checker { origin: "" };
    c.motion(field, motion).map_err(|e| match e {
        CaseError::Invalid { field, message, .. } => (field, message),
        other => (field.to_string(), other.to_string()),
    })
}

/// Builds errors with the case's name and a field path.
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

    /// `v` must be a finite number in `range`. A value <= 0 where only positive values are
    /// allowed is said so first ("must be > 0, got -0.1").
    fn range(&self, field: impl Into<String>, v: f64, range: &Range) -> Result<(), CaseError> {
        if range.contains(v) {
            return Ok(());
        }
        let got = ranges::value(v);
        let positive = range.lo > 0.0 || (range.lo == 0.0 && range.lo_open);
        let message = if !v.is_finite() {
            format!("must be a finite number in {range}, got {got}")
        } else if positive && v <= 0.0 {
            format!("must be > 0, got {got} (allowed: {range})")
        } else {
            format!("must be in {range}, got {got}")
        };
        Err(self.fail(field, message))
    }

    /// Every component of `v` finite and in `range`.
    fn components(
        &self,
        field: impl Into<String>,
        v: [f64; 3],
        range: &Range,
    ) -> Result<(), CaseError> {
        if v.iter().all(|&c| range.contains(c)) {
            return Ok(());
        }
        let what = if v.iter().all(|c| c.is_finite()) {
            "every component must be in"
        } else {
            "every component must be a finite number in"
        };
        Err(self.fail(field, format!("{what} {range}, got {}", show3(v))))
    }

    /// `v` finite with length at most `max` [`unit`].
    fn length(
        &self,
        field: impl Into<String>,
        v: [f64; 3],
        max: f64,
        unit: &str,
    ) -> Result<(), CaseError> {
        if !vec3::is_finite(v) {
            return Err(self.fail(field, format!("must be finite, got {}", show3(v))));
        }
        // Scaled so that the length of e.g. [1e200, 1e200, 0] does not overflow to inf.
        let m = v.iter().fold(0.0f64, |a, c| a.max(c.abs()));
        let len = if m > 0.0 {
            m * vec3::norm(v.map(|c| c / m))
        } else {
            0.0
        };
        if len <= max {
            Ok(())
        } else {
            Err(self.fail(
                field,
                format!(
                    "must have a length of at most {} {unit}, got {} (length {})",
                    ranges::bound(max),
                    show3(v),
                    ranges::value(len)
                ),
            ))
        }
    }

    fn boxed(&self, field: &str, min: [f64; 3], max: [f64; 3]) -> Result<(), CaseError> {
        self.components(format!("{field}.min"), min, &ranges::COORDINATE)?;
        self.components(format!("{field}.max"), max, &ranges::COORDINATE)?;
        for a in 0..3 {
            if max[a] <= min[a] {
                return Err(self.fail(
                    format!("{field}.max"),
                    format!(
                        "must exceed {field}.min on every axis, got min {}, max {}",
                        show3(min),
                        show3(max)
                    ),
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
            self.range(format!("{field}.young_modulus"), e, &ranges::YOUNG_MODULUS)?;
        }
        if let Some(k) = k {
            self.range(
                format!("{field}.normal_stiffness"),
                k,
                &ranges::NORMAL_STIFFNESS,
            )?;
        }
        self.range(format!("{field}.poisson_ratio"), nu, &ranges::POISSON)?;
        self.range(format!("{field}.restitution"), rest, &ranges::RESTITUTION)?;
        self.range(format!("{field}.sliding_friction"), mu, &ranges::FRICTION)?;
        self.range(format!("{field}.rolling_friction"), mu_r, &ranges::FRICTION)
    }

    fn motion(&self, f: &str, motion: &Motion) -> Result<(), CaseError> {
        match motion {
            Motion::Fixed => Ok(()),
            Motion::Translation { velocity } => self.length(
                format!("{f}.motion.velocity"),
                *velocity,
                ranges::VELOCITY_MAX,
                "m/s",
            ),
            Motion::Rotation {
                axis_point,
                axis_direction,
                rpm,
            } => {
                self.axis(&format!("{f}.motion"), *axis_point, *axis_direction)?;
                self.range(format!("{f}.motion.rpm"), *rpm, &ranges::RPM)
            }
            Motion::Schedule { segments } => self.schedule(&format!("{f}.motion"), segments),
            Motion::Oscillation {
                amplitude,
                frequency,
                phase_deg,
            } => {
                self.components(
                    format!("{f}.motion.amplitude"),
                    *amplitude,
                    &ranges::COORDINATE,
                )?;
                self.harmonic(f, *frequency, *phase_deg)
            }
            Motion::Rocking {
                axis_point,
                axis_direction,
                amplitude_deg,
                frequency,
                phase_deg,
            } => {
                self.axis(&format!("{f}.motion"), *axis_point, *axis_direction)?;
                self.range(
                    format!("{f}.motion.amplitude_deg"),
                    *amplitude_deg,
                    &ranges::ROCKING_DEG,
                )?;
                self.harmonic(f, *frequency, *phase_deg)
            }
        }
    }

    /// The frequency and phase of a harmonic motion.
    fn harmonic(&self, f: &str, frequency: f64, phase_deg: f64) -> Result<(), CaseError> {
        self.range(
            format!("{f}.motion.frequency"),
            frequency,
            &ranges::FREQUENCY,
        )?;
        self.range(
            format!("{f}.motion.phase_deg"),
            phase_deg,
            &ranges::PHASE_DEG,
        )
    }

    fn axis(&self, f: &str, point: [f64; 3], direction: [f64; 3]) -> Result<(), CaseError> {
        self.components(format!("{f}.axis_point"), point, &ranges::COORDINATE)?;
        self.components(
            format!("{f}.axis_direction"),
            direction,
            &ranges::AXIS_COMPONENT,
        )?;
        if vec3::norm(direction) == 0.0 {
            return Err(self.fail(
                format!("{f}.axis_direction"),
                format!(
                    "must not be the zero vector (or too short to normalise), got {}",
                    show3(direction)
                ),
            ));
        }
        Ok(())
    }

    /// Segments in time order, not overlapping; only the last may be open-ended; a ramp needs
    /// an end.
    fn schedule(&self, f: &str, segments: &[Segment]) -> Result<(), CaseError> {
        if segments.is_empty() {
            return Err(self.fail(
                format!("{f}.segments"),
                "is empty: give at least one segment, or use `type = \"fixed\"`".into(),
            ));
        }
        if segments.len() > ranges::SCHEDULE_SEGMENTS_MAX {
            return Err(self.fail(
                format!("{f}.segments"),
                format!(
                    "has {} segments; at most {} are allowed",
                    segments.len(),
                    ranges::SCHEDULE_SEGMENTS_MAX
                ),
            ));
        }
        let mut prev_end = 0.0;
        for (i, s) in segments.iter().enumerate() {
            let g = format!("{f}.segments[{i}]");
            self.range(format!("{g}.start"), s.start(), &ranges::SCHEDULE_TIME)?;
            if s.start() < prev_end {
                return Err(self.fail(
                    format!("{g}.start"),
                    format!(
                        "= {} s is before the end of the previous segment ({} s): segments \
                         must be in time order and must not overlap",
                        ranges::value(s.start()),
                        ranges::value(prev_end)
                    ),
                ));
            }
            match s.end() {
                Some(end) => {
                    self.range(format!("{g}.end"), end, &ranges::SCHEDULE_TIME)?;
                    if end <= s.start() {
                        return Err(self.fail(
                            format!("{g}.end"),
                            format!(
                                "= {} s must be after its start ({} s)",
                                ranges::value(end),
                                ranges::value(s.start())
                            ),
                        ));
                    }
                    prev_end = end;
                }
                None if i + 1 < segments.len() => {
                    return Err(self.fail(
                        format!("{g}.end"),
                        "is missing: only the last segment may last to the end of the run".into(),
                    ))
                }
                None if s.is_ramp() => {
                    return Err(self.fail(
                        format!("{g}.end"),
                        "is missing: a ramp (`velocity_end` or `rpm_end`) needs an end time".into(),
                    ))
                }
                None => {}
            }
            match s {
                Segment::Hold { .. } => {}
                Segment::Translation {
                    velocity,
                    velocity_end,
                    ..
                } => {
                    self.length(
                        format!("{g}.velocity"),
                        *velocity,
                        ranges::VELOCITY_MAX,
                        "m/s",
                    )?;
                    if let Some(v) = velocity_end {
                        self.length(format!("{g}.velocity_end"), *v, ranges::VELOCITY_MAX, "m/s")?;
                    }
                }
                Segment::Rotation {
                    axis_point,
                    axis_direction,
                    rpm,
                    rpm_end,
                    ..
                } => {
                    self.axis(&g, *axis_point, *axis_direction)?;
                    self.range(format!("{g}.rpm"), *rpm, &ranges::RPM)?;
                    if let Some(r) = rpm_end {
                        self.range(format!("{g}.rpm_end"), *r, &ranges::RPM)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A vector for messages, each component as [`ranges::value`] prints it.
fn show3(v: [f64; 3]) -> String {
    format!(
        "[{}, {}, {}]",
        ranges::value(v[0]),
        ranges::value(v[1]),
        ranges::value(v[2])
    )
}

impl Case {
    /// The segment field mask of `[output] fields` (the method's default when absent).
    pub fn frame_fields(&self) -> Result<u32, CaseError> {
        self.output
            .frame_mask::<crate::dem::Dem>()
            .map_err(|message| CaseError::Invalid {
                origin: self.origin.name.clone(),
                field: "output.fields".into(),
                message,
            })
    }

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

    /// Checks the fields only (no file access, no particle placement): every number against its
    /// documented range ([`super::ranges`]), names, references between fields, and the particle
    /// count against the protocol's limit.
    pub fn validate_fields(&self) -> Result<(), CaseError> {
        let c = Checker {
            origin: &self.origin.name,
        };
        c.range("dt", self.dt, &ranges::DT)?;
        c.range("end_time", self.end_time, &ranges::SIM_TIME)?;
        c.length("gravity", self.gravity, ranges::GRAVITY_MAX, "m/s^2")?;
        c.boxed("domain", self.domain.min, self.domain.max)?;
        if self.reorder_every == 0 {
            return Err(c.fail("reorder_every", "must be > 0, got 0".into()));
        }
        let hertz = matches!(self.contact_model, ContactModelSpec::HertzMindlin { .. });
        if let ContactModelSpec::Linear {
            tangential_stiffness_ratio,
            ..
        } = self.contact_model
        {
            c.range(
                "contact_model.tangential_stiffness_ratio",
                tangential_stiffness_ratio,
                &ranges::STIFFNESS_RATIO,
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
            c.range(format!("{f}.radius"), s.radius, &ranges::RADIUS)?;
            c.range(format!("{f}.density"), s.density, &ranges::DENSITY)?;
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
            self.validate_source(&c, k, src)?;
        }
        self.check_particle_count()?;
        for (k, m) in self.meshes.iter().enumerate() {
            let f = format!("meshes[{k}]");
            if self.meshes[..k].iter().any(|o| o.name == m.name) {
                return Err(c.fail(
                    format!("{f}.name"),
                    format!("\"{}\" is used by an earlier mesh", m.name),
                ));
            }
            c.range(format!("{f}.scale"), m.scale, &ranges::SCALE)?;
            if let Some(mat) = &m.material {
                c.material(&format!("{f}.material"), mat, hertz)?;
            }
            c.motion(&f, &m.motion)?;
        }
        for (k, i) in self.inflows.iter().enumerate() {
            let f = format!("inflows[{k}]");
            self.species_choice(&c, &format!("{f}.species"), &i.species)?;
            c.boxed(&f, i.min, i.max)?;
            let r = self.choice_max_radius(&i.species);
            if (0..3).any(|a| i.max[a] - i.min[a] < 2.0 * r) {
                return Err(c.fail(
                    &f,
                    format!(
                        "region {}..{} is smaller than a particle of diameter {}",
                        show3(i.min),
                        show3(i.max),
                        ranges::value(2.0 * r)
                    ),
                ));
            }
            if let Some(shape) = &i.shape {
                self.shape(&c, &format!("{f}.shape"), shape)?;
            }
            match (i.rate, i.mass_rate) {
                (Some(v), None) => c.range(format!("{f}.rate"), v, &ranges::INFLOW_RATE)?,
                (None, Some(v)) => {
                    c.range(format!("{f}.mass_rate"), v, &ranges::INFLOW_MASS_RATE)?
                }
                _ => {
                    return Err(c.fail(
                        &f,
                        "needs exactly one of `rate` (particles/s) and `mass_rate` (kg/s)".into(),
                    ))
                }
            }
            c.range(format!("{f}.start"), i.start, &ranges::SCHEDULE_TIME)?;
            if let Some(end) = i.end {
                c.range(format!("{f}.end"), end, &ranges::SCHEDULE_TIME)?;
                if end <= i.start {
                    return Err(c.fail(
                        format!("{f}.end"),
                        format!(
                            "= {} s must be after its start ({} s)",
                            ranges::value(end),
                            ranges::value(i.start)
                        ),
                    ));
                }
            }
            c.range(format!("{f}.interval"), i.interval, &ranges::SIM_TIME)?;
            c.length(
                format!("{f}.velocity"),
                i.velocity,
                ranges::VELOCITY_MAX,
                "m/s",
            )?;
        }
        for (k, o) in self.outflows.iter().enumerate() {
            let f = format!("outflows[{k}]");
            match o {
                super::Outflow::Box { min, max } => c.boxed(&f, *min, *max)?,
                super::Outflow::OutsideDomain { margin } => {
                    c.range(format!("{f}.margin"), *margin, &ranges::MARGIN)?
                }
            }
        }
        for f in super::Face::ALL {
            if let Some(mat) = self.domain.face_materials.get(f) {
                c.material(&format!("domain.face_materials.{}", f.name()), mat, hertz)?;
            }
        }
        for (k, i) in self.interactions.iter().enumerate() {
            let f = format!("interactions[{k}]");
            self.interaction_target(i)
                .map_err(|m| c.fail(format!("{f}.between"), m))?;
            if let Some(e) = i.restitution {
                c.range(format!("{f}.restitution"), e, &ranges::RESTITUTION)?;
            }
            if let Some(m) = i.sliding_friction {
                c.range(format!("{f}.sliding_friction"), m, &ranges::FRICTION)?;
            }
            if let Some(m) = i.rolling_friction {
                c.range(format!("{f}.rolling_friction"), m, &ranges::FRICTION)?;
            }
            if i.restitution.is_none()
                && i.sliding_friction.is_none()
                && i.rolling_friction.is_none()
            {
                return Err(c.fail(
                    f,
                    "sets nothing: give restitution, sliding_friction or rolling_friction".into(),
                ));
            }
        }
        if let Err(e) = self.decomposition.check() {
            return Err(c.fail("decomposition.subdomains", e.to_string()));
        }
        if let Some(v) = self.output.vtk_interval {
            c.range("output.vtk_interval", v, &ranges::SIM_TIME)?;
        }
        if let Some(v) = self.output.checkpoint_interval {
            c.range("output.checkpoint_interval", v, &ranges::SIM_TIME)?;
        }
        self.frame_fields()?;
        Ok(())
    }

    fn validate_source(&self, c: &Checker<'_>, k: usize, src: &Source) -> Result<(), CaseError> {
        let f = format!("sources[{k}]");
        let (species, min, max, velocity) = match src {
            Source::Grid {
                species,
                min,
                max,
                velocity,
                ..
            }
            | Source::RandomBox {
                species,
                min,
                max,
                velocity,
                ..
            } => (species, *min, *max, *velocity),
        };
        self.species_choice(c, &format!("{f}.species"), species)?;
        let radius = self.choice_max_radius(species);
        c.boxed(&f, min, max)?;
        c.length(
            format!("{f}.velocity"),
            velocity,
            ranges::VELOCITY_MAX,
            "m/s",
        )?;
        if let Some(shape) = src.shape() {
            self.shape(c, &format!("{f}.shape"), shape)?;
        }
        match src {
            Source::Grid {
                spacing,
                count,
                jitter,
                ..
            } => {
                let d = 2.0 * radius;
                let spacing_range = Range::closed(d, ranges::SPACING_MAX, "m");
                if spacing.is_finite() && *spacing > 0.0 && *spacing < d {
                    let whose = match species {
                        SpeciesChoice::One(n) => format!("species \"{n}\""),
                        SpeciesChoice::Mix { .. } => "the largest species of the mix".into(),
                    };
                    return Err(c.fail(
                        format!("{f}.spacing"),
                        format!(
                            "must be >= the diameter {} of {whose}, got {}",
                            ranges::value(d),
                            ranges::value(*spacing)
                        ),
                    ));
                }
                c.range(format!("{f}.spacing"), *spacing, &spacing_range)?;
                if *count == Some(0) {
                    return Err(c.fail(format!("{f}.count"), "must be > 0, got 0".into()));
                }
                c.range(format!("{f}.jitter"), *jitter, &ranges::JITTER)?;
            }
            Source::RandomBox { count, shape, .. } => {
                if *count == 0 {
                    return Err(c.fail(format!("{f}.count"), "must be > 0, got 0".into()));
                }
                // One species without a shape: checked here already (the others when placed,
                // where the size classes and the shape's volume are known).
                if let (SpeciesChoice::One(_), None) = (species, shape) {
                    super::sources::random_box_feasible(
                        &self.origin.name,
                        &f,
                        radius,
                        min,
                        max,
                        *count,
                    )?;
                }
            }
        }
        Ok(())
    }

    /// A species name that exists, or fractions over existing species, each in (0, 1], adding
    /// up to 1.
    fn species_choice(
        &self,
        c: &Checker<'_>,
        f: &str,
        choice: &SpeciesChoice,
    ) -> Result<(), CaseError> {
        let known = || {
            self.species
                .iter()
                .map(|s| format!("\"{}\"", s.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match choice {
            SpeciesChoice::One(n) => {
                if self.species_index(n).is_none() {
                    return Err(c.fail(
                        f,
                        format!("names unknown species \"{n}\" (species: {})", known()),
                    ));
                }
            }
            SpeciesChoice::Mix { fractions, basis } => {
                let key = match basis {
                    FractionBasis::Mass => "mass_fractions",
                    FractionBasis::Number => "number_fractions",
                };
                if fractions.is_empty() {
                    return Err(c.fail(format!("{f}.{key}"), "is empty".into()));
                }
                for (n, x) in fractions {
                    if self.species_index(n).is_none() {
                        return Err(c.fail(
                            format!("{f}.{key}"),
                            format!("names unknown species \"{n}\" (species: {})", known()),
                        ));
                    }
                    c.range(format!("{f}.{key}.{n}"), *x, &ranges::FRACTION)?;
                }
                let sum: f64 = fractions.iter().map(|x| x.1).sum();
                if (sum - 1.0).abs() > 1e-3 {
                    return Err(c.fail(
                        format!("{f}.{key}"),
                        format!(
                            "add up to {}, not 1 (give fractions, e.g. 0.3 for 30 %)",
                            ranges::value(sum)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn shape(&self, c: &Checker<'_>, f: &str, shape: &Shape) -> Result<(), CaseError> {
        match shape {
            Shape::Cylinder {
                base,
                axis,
                radius,
                length,
            } => {
                self.axis_like(c, f, *base, *axis)?;
                c.range(format!("{f}.radius"), *radius, &ranges::SHAPE_SIZE)?;
                c.range(format!("{f}.length"), *length, &ranges::SHAPE_SIZE)
            }
            Shape::Mesh { mesh, stl, scale } => {
                c.range(format!("{f}.scale"), *scale, &ranges::SCALE)?;
                match (mesh, stl) {
                    (Some(name), None) => {
                        if !self.meshes.iter().any(|m| m.name == *name) {
                            return Err(c.fail(
                                format!("{f}.mesh"),
                                format!("names mesh \"{name}\", which this case does not have"),
                            ));
                        }
                        Ok(())
                    }
                    (None, Some(_)) => Ok(()),
                    _ => Err(c.fail(
                        f,
                        "needs exactly one of `mesh` (a mesh of this case) or `stl`".into(),
                    )),
                }
            }
        }
    }

    fn axis_like(
        &self,
        c: &Checker<'_>,
        f: &str,
        base: [f64; 3],
        axis: [f64; 3],
    ) -> Result<(), CaseError> {
        c.components(format!("{f}.base"), base, &ranges::COORDINATE)?;
        c.components(format!("{f}.axis"), axis, &ranges::AXIS_COMPONENT)?;
        if vec3::norm(axis) == 0.0 {
            return Err(c.fail(
                format!("{f}.axis"),
                "must not be the zero vector (or too short to normalise)".into(),
            ));
        }
        Ok(())
    }
}
