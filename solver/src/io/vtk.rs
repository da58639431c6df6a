//! VTK XML output for ParaView: particles as `.vtu` (unstructured grid of vertices), meshes as
//! `.vtp` (polygons), binary data in a raw appended block (`header_type="UInt64"`), and a `.pvd`
//! collection indexing the series (particles as part 0, meshes as part 1).

use crate::core::vec3;
use crate::exec::sim::Simulation;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why VTK output failed; names the path.
#[derive(Debug, thiserror::Error)]
pub enum VtkError {
    #[error("{path}: cannot create output directory: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot write VTK file: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: cannot read the particles from the backend: {source}")]
    State {
        path: PathBuf,
        #[source]
        source: crate::exec::worker::StepError,
    },
}

/// One data array of the appended block.
enum Data<'a> {
    F32(&'a [f32], usize),
    U32(&'a [u32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
}

impl Data<'_> {
    fn type_name(&self) -> &'static str {
        match self {
            Data::F32(..) => "Float32",
            Data::U32(_) => "UInt32",
            Data::I64(_) => "Int64",
            Data::U8(_) => "UInt8",
        }
    }
    fn components(&self) -> usize {
        match self {
            Data::F32(_, c) => *c,
            _ => 1,
        }
    }
    fn append_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&0u64.to_le_bytes());
        match self {
            Data::F32(v, _) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Data::U32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Data::I64(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
            Data::U8(v) => out.extend_from_slice(v),
        }
        let len = (out.len() - start - 8) as u64;
        out[start..start + 8].copy_from_slice(&len.to_le_bytes());
    }
}

/// Builds the XML and the appended block together.
struct Writer {
    xml: String,
    blob: Vec<u8>,
}

impl Writer {
    fn new(kind: &str) -> Self {
        let mut xml = String::new();
        let _ = write!(xml, "<?xml version=\"1.0\"?>\n<VTKFile type=\"{kind}\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n<{kind}>\n");
        Writer {
            xml,
            blob: Vec::new(),
        }
    }
    fn array(&mut self, name: &str, d: Data) {
        let _ = writeln!(
            self.xml,
            "<DataArray type=\"{}\" Name=\"{name}\" NumberOfComponents=\"{}\" format=\"appended\" offset=\"{}\"/>",
            d.type_name(),
            d.components(),
            self.blob.len()
        );
        d.append_to(&mut self.blob);
    }
    fn line(&mut self, s: &str) {
        self.xml.push_str(s);
        self.xml.push('\n');
    }
    fn finish(mut self, kind: &str, path: &Path) -> Result<(), VtkError> {
        let _ = write!(self.xml, "</{kind}>\n<AppendedData encoding=\"raw\">\n_");
        let mut bytes = self.xml.into_bytes();
        bytes.extend_from_slice(&self.blob);
        bytes.extend_from_slice(b"\n</AppendedData>\n</VTKFile>\n");
        std::fs::write(path, bytes).map_err(|source| VtkError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// One per-particle array of a `.vtu` file.
pub enum PointArray {
    /// f32 values, `components` per particle.
    F32(Vec<f32>, usize),
    U32(Vec<u32>),
}

/// Particles as plain data for a `.vtu` file, whatever the method: positions and named point
/// arrays (the first scalar and the first vector are ParaView's defaults).
pub struct VtkParticles {
    pub positions: Vec<[f32; 3]>,
    pub arrays: Vec<(&'static str, PointArray)>,
}

/// Writes `p` as a `.vtu` file (one vertex cell per particle).
pub fn write_vtu(path: &Path, p: &VtkParticles) -> Result<(), VtkError> {
    let n = p.positions.len();
    let pos: Vec<f32> = p.positions.iter().flatten().copied().collect();
    let conn: Vec<i64> = (0..n as i64).collect();
    let offs: Vec<i64> = (1..=n as i64).collect();
    let types = vec![1u8; n]; // VTK_VERTEX
    let scalar = p
        .arrays
        .iter()
        .find(|a| !matches!(a.1, PointArray::F32(_, 3)));
    let vector = p
        .arrays
        .iter()
        .find(|a| matches!(a.1, PointArray::F32(_, 3)));
    let mut w = Writer::new("UnstructuredGrid");
    w.line(&format!(
        "<Piece NumberOfPoints=\"{n}\" NumberOfCells=\"{n}\">"
    ));
    w.line(&format!(
        "<PointData{}{}>",
        scalar.map_or(String::new(), |a| format!(" Scalars=\"{}\"", a.0)),
        vector.map_or(String::new(), |a| format!(" Vectors=\"{}\"", a.0)),
    ));
    for (name, a) in &p.arrays {
        match a {
            PointArray::F32(v, c) => w.array(name, Data::F32(v, *c)),
            PointArray::U32(v) => w.array(name, Data::U32(v)),
        }
    }
    w.line("</PointData>\n<Points>");
    w.array("Points", Data::F32(&pos, 3));
    w.line("</Points>\n<Cells>");
    w.array("connectivity", Data::I64(&conn));
    w.array("offsets", Data::I64(&offs));
    w.array("types", Data::U8(&types));
    w.line("</Cells>\n</Piece>");
    w.finish("UnstructuredGrid", path)
}

/// The DEM particles of `sim`: velocity, angular velocity, radius, species, id.
pub fn dem_particles(sim: &Simulation) -> Result<VtkParticles, crate::exec::worker::StepError> {
    let flat = |v: Vec<[f32; 3]>| v.into_iter().flatten().collect::<Vec<f32>>();
    Ok(VtkParticles {
        positions: sim.positions_f32()?,
        arrays: vec![
            ("velocity", PointArray::F32(flat(sim.velocities_f32()?), 3)),
            (
                "angular_velocity",
                PointArray::F32(flat(sim.angular_velocities_f32()?), 3),
            ),
            ("radius", PointArray::F32(sim.radii_f32(), 1)),
            ("species", PointArray::U32(sim.species_ids())),
            ("id", PointArray::U32(sim.particle_ids())),
        ],
    })
}

/// Writes the particles of `sim` as a `.vtu` file.
pub fn write_particles_vtu(path: &Path, sim: &Simulation) -> Result<(), VtkError> {
    let p = dem_particles(sim).map_err(|source| VtkError::State {
        path: path.to_path_buf(),
        source,
    })?;
    write_vtu(path, &p)
}

/// Writes all meshes of `sim` at their current pose as one `.vtp` file (cell data `mesh` = index).
pub fn write_meshes_vtp(path: &Path, sim: &Simulation) -> Result<(), VtkError> {
    let transforms = sim.mesh_transforms();
    let mut pts = Vec::new();
    let mut mesh_of = Vec::new();
    for (k, m) in sim.meshes().iter().enumerate() {
        for t in &m.triangles {
            for v in t {
                pts.extend(vec3::to_f32(transforms[k].apply(*v)));
            }
            mesh_of.push(k as u32);
        }
    }
    let nt = mesh_of.len();
    let conn: Vec<i64> = (0..3 * nt as i64).collect();
    let offs: Vec<i64> = (1..=nt as i64).map(|k| 3 * k).collect();
    let mut w = Writer::new("PolyData");
    w.line(&format!("<Piece NumberOfPoints=\"{}\" NumberOfVerts=\"0\" NumberOfLines=\"0\" NumberOfStrips=\"0\" NumberOfPolys=\"{nt}\">", 3 * nt));
    w.line("<CellData Scalars=\"mesh\">");
    w.array("mesh", Data::U32(&mesh_of));
    w.line("</CellData>\n<Points>");
    w.array("Points", Data::F32(&pts, 3));
    w.line("</Points>\n<Polys>");
    w.array("connectivity", Data::I64(&conn));
    w.array("offsets", Data::I64(&offs));
    w.line("</Polys>\n</Piece>");
    w.finish("PolyData", path)
}

/// A time series of VTK files plus its `.pvd` index, rewritten after every frame.
pub struct VtkSeries {
    dir: PathBuf,
    prefix: String,
    /// (time, part, file name)
    entries: Vec<(f64, u32, String)>,
    /// Step of the last frame written.
    last_step: Option<u64>,
}

impl VtkSeries {
    /// Creates `dir` if needed. Files are named `<prefix>_particles_<step>.vtu`,
    /// `<prefix>_meshes_<step>.vtp` and `<prefix>.pvd`.
    pub fn new(dir: &Path, prefix: &str) -> Result<Self, VtkError> {
        std::fs::create_dir_all(dir).map_err(|source| VtkError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(VtkSeries {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            entries: Vec::new(),
            last_step: None,
        })
    }

    /// Path of the `.pvd` index.
    pub fn pvd_path(&self) -> PathBuf {
        self.dir.join(format!("{}.pvd", self.prefix))
    }

    /// Writes the current state of `sim` and updates the index. A step already written (the
    /// run's end falling on an output time asks twice) is not listed again.
    pub fn write_frame(&mut self, sim: &Simulation) -> Result<(), VtkError> {
        let step = sim.step_index();
        if self.last_step == Some(step) {
            return Ok(());
        }
        let name = format!("{}_particles_{step:010}.vtu", self.prefix);
        write_particles_vtu(&self.dir.join(&name), sim)?;
        let mut parts = vec![(0, name)];
        if !sim.meshes().is_empty() {
            let name = format!("{}_meshes_{step:010}.vtp", self.prefix);
            write_meshes_vtp(&self.dir.join(&name), sim)?;
            parts.push((1, name));
        }
        self.index(step, sim.time(), parts)
    }

    /// Writes particles of any method at `step`, `time` and updates the index (a step already
    /// written is not listed again).
    pub fn write_particles(
        &mut self,
        step: u64,
        time: f64,
        particles: &VtkParticles,
    ) -> Result<(), VtkError> {
        if self.last_step == Some(step) {
            return Ok(());
        }
        let name = format!("{}_particles_{step:010}.vtu", self.prefix);
        write_vtu(&self.dir.join(&name), particles)?;
        self.index(step, time, vec![(0, name)])
    }

    /// Adds the files of one step to the index and rewrites the `.pvd`.
    fn index(&mut self, step: u64, time: f64, parts: Vec<(u32, String)>) -> Result<(), VtkError> {
        self.last_step = Some(step);
        self.entries
            .extend(parts.into_iter().map(|(part, file)| (time, part, file)));
        let mut xml = String::from("<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"1.0\" byte_order=\"LittleEndian\">\n<Collection>\n");
        for (t, part, file) in &self.entries {
            let _ = writeln!(
                xml,
                "<DataSet timestep=\"{t:e}\" group=\"\" part=\"{part}\" file=\"{file}\"/>"
            );
        }
        xml.push_str("</Collection>\n</VTKFile>\n");
        let path = self.pvd_path();
        std::fs::write(&path, xml).map_err(|source| VtkError::Write { path, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Case;

    /// The end of a run on an output time writes the same step twice: the index lists it once.
    #[test]
    fn a_step_written_twice_is_listed_once() {
        let dir = std::env::temp_dir().join(format!("vtk-series-{}", std::process::id()));
        let mut sim = Simulation::new(Case::default_falling_box(50)).expect("case");
        let mut series = VtkSeries::new(&dir, "run").expect("dir");
        series.write_frame(&sim).expect("write");
        sim.step_n(10).expect("steps");
        series.write_frame(&sim).expect("write");
        series.write_frame(&sim).expect("write again");
        let pvd = std::fs::read_to_string(series.pvd_path()).expect("pvd");
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(pvd.matches("<DataSet").count(), 2, "{pvd}");
        assert_eq!(pvd.matches("_particles_0000000010.vtu").count(), 1, "{pvd}");
    }
}
