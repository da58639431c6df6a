//! How meshes (drums, blades, walls) are drawn: solid, see-through, as edges only, or not at
//! all. Shared by the CPU rasteriser and the window, set by `--meshes`/`--mesh-opacity` and the
//! window's M key.

/// Mesh display mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MeshMode {
    /// Opaque, lit surfaces (hides what is inside a closed mesh).
    #[default]
    Solid,
    /// Surfaces blended over the particles with --mesh-opacity: particles inside a closed drum
    /// show through.
    Transparent,
    /// Triangle edges only: particles inside a closed drum show between the edges.
    Wireframe,
    /// No meshes at all.
    Hidden,
}

impl MeshMode {
    pub const ALL: [MeshMode; 4] = [
        Self::Solid,
        Self::Transparent,
        Self::Wireframe,
        Self::Hidden,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Solid => "solid",
            Self::Transparent => "transparent",
            Self::Wireframe => "wireframe",
            Self::Hidden => "hidden",
        }
    }

    /// The next mode in `ALL` order (the window's M key).
    pub fn next(self) -> Self {
        let i = Self::ALL.iter().position(|m| *m == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }
}

/// Default opacity of `transparent` meshes: the particles behind a surface keep about two
/// thirds of their colour through one wall and ~40 % through the two walls of a drum
/// (0.65^2), while the surface stays clearly visible.
pub const DEFAULT_OPACITY: f32 = 0.35;

/// Mode plus the opacity used by [`MeshMode::Transparent`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeshStyle {
    pub mode: MeshMode,
    /// 0 = invisible, 1 = opaque; only `Transparent` uses it.
    pub opacity: f32,
}

impl Default for MeshStyle {
    fn default() -> Self {
        Self {
            mode: MeshMode::Solid,
            opacity: DEFAULT_OPACITY,
        }
    }
}

/// `--mesh-opacity`: a number in 0..=1.
pub fn parse_opacity(s: &str) -> Result<f32, String> {
    s.trim()
        .parse::<f32>()
        .ok()
        .filter(|a| (0.0..=1.0).contains(a))
        .ok_or_else(|| {
            format!("opacity must be a number from 0 (invisible) to 1 (opaque), got {s:?}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_cycles_through_every_mode() {
        let mut m = MeshMode::Solid;
        let mut seen = vec![m];
        for _ in 1..MeshMode::ALL.len() {
            m = m.next();
            seen.push(m);
        }
        assert_eq!(seen, MeshMode::ALL);
        assert_eq!(m.next(), MeshMode::Solid);
    }

    #[test]
    fn names_match_the_command_line() {
        use clap::ValueEnum;
        for m in MeshMode::ALL {
            let v = m.to_possible_value().expect("every mode is a value");
            assert_eq!(v.get_name(), m.name());
        }
    }

    #[test]
    fn opacity_is_bounded() {
        assert_eq!(parse_opacity("0.5"), Ok(0.5));
        assert_eq!(parse_opacity("0"), Ok(0.0));
        assert_eq!(parse_opacity("1"), Ok(1.0));
        for bad in ["1.5", "-0.1", "nan", "inf", "half", ""] {
            assert!(parse_opacity(bad).is_err(), "{bad}");
        }
    }
}
