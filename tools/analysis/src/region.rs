//! Axis-aligned boxes: the `--region` of the solid fraction.

use std::str::FromStr;

/// An axis-aligned box `[min, max]` [m].
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Aabb {
    pub min: [f64; 3],
    pub max: [f64; 3],
}

impl Aabb {
    /// A box with `min < max` on every axis, all finite.
    pub fn new(min: [f64; 3], max: [f64; 3]) -> Result<Self, String> {
        if min.iter().chain(&max).any(|v| !v.is_finite()) {
            return Err(format!("region {min:?}..{max:?} has a non-finite bound"));
        }
        if (0..3).any(|k| min[k] >= max[k]) {
            return Err(format!(
                "region {min:?}..{max:?} is empty: every min must be below its max"
            ));
        }
        Ok(Self { min, max })
    }

    /// The lower half (in z) of the world box: the default solid-fraction region.
    pub fn lower_half(world_min: [f64; 3], world_max: [f64; 3]) -> Result<Self, String> {
        let mut max = world_max;
        max[2] = 0.5 * (world_min[2] + world_max[2]);
        Self::new(world_min, max)
    }

    /// Volume [m^3].
    pub fn volume(&self) -> f64 {
        (0..3).map(|k| self.max[k] - self.min[k]).product()
    }
}

impl FromStr for Aabb {
    type Err = String;
    /// `xmin,ymin,zmin,xmax,ymax,zmax` in metres.
    fn from_str(s: &str) -> Result<Self, String> {
        let v: Vec<f64> = s
            .split(',')
            .map(|w| {
                w.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("{w:?} is not a number"))
            })
            .collect::<Result<_, _>>()?;
        if v.len() != 6 {
            return Err(format!(
                "expected 6 numbers xmin,ymin,zmin,xmax,ymax,zmax, got {}",
                v.len()
            ));
        }
        Self::new([v[0], v[1], v[2]], [v[3], v[4], v[5]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let b: Aabb = "0,0,0,1,2,3".parse().unwrap();
        assert_eq!(b.volume(), 6.0);
        assert!("0,0,0,1,2".parse::<Aabb>().is_err());
        assert!("0,0,0,1,x,3".parse::<Aabb>().is_err());
        assert!("1,0,0,0,1,1".parse::<Aabb>().unwrap_err().contains("empty"));
        let h = Aabb::lower_half([0.0; 3], [1.0, 1.0, 2.0]).unwrap();
        assert_eq!(h.max, [1.0, 1.0, 1.0]);
    }
}
