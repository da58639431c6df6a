//! STL reader (binary and ASCII), hand-written so that every error names the file and the
//! triangle or line, and so that no input can make it panic (checked by a property test).
//!
//! Detection: a file whose length is exactly `84 + 50 * count` (count = the u32 at byte 80) is
//! binary, whatever its first bytes say (many binary exporters start the header with "solid").
//! Otherwise a file starting with `solid` is read as ASCII, and anything else is an error.

use std::path::{Path, PathBuf};

/// A triangle as three vertices [m] (or the file's unit; see the case's `scale`).
pub type Triangle = [[f64; 3]; 3];

/// Why an STL file could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum StlError {
    #[error("{path}: cannot read STL file: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: binary STL is {len} bytes, too short for the 84-byte header")]
    TooShort { path: PathBuf, len: usize },
    #[error("{path}: binary STL header declares {declared} triangles ({expected} bytes) but the file has {len} bytes")]
    CountMismatch {
        path: PathBuf,
        declared: u32,
        expected: u64,
        len: usize,
    },
    #[error("{path}: triangle {triangle} has a non-finite vertex coordinate")]
    NonFinite { path: PathBuf, triangle: usize },
    #[error("{path}:{line}: {message}")]
    Ascii {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: ASCII STL is not valid UTF-8 near byte {offset}")]
    NotUtf8 { path: PathBuf, offset: usize },
    #[error("{path}: STL file contains no triangles")]
    Empty { path: PathBuf },
}

/// Reads an STL file from disk.
pub fn read_stl(path: &Path) -> Result<Vec<Triangle>, StlError> {
    let bytes = std::fs::read(path).map_err(|source| StlError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_stl(&bytes, path)
}

/// Parses STL bytes; `path` is only used in error messages.
pub fn parse_stl(bytes: &[u8], path: &Path) -> Result<Vec<Triangle>, StlError> {
    let tris = if is_exact_binary(bytes) {
        parse_binary(bytes, path)?
    } else if starts_with_solid(bytes) {
        parse_ascii(bytes, path)?
    } else {
        parse_binary(bytes, path)?
    };
    if tris.is_empty() {
        return Err(StlError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(tris)
}

fn declared_count(bytes: &[u8]) -> Option<u32> {
    let c = bytes.get(80..84)?;
    Some(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

fn is_exact_binary(bytes: &[u8]) -> bool {
    declared_count(bytes).is_some_and(|n| 84 + 50 * n as u64 == bytes.len() as u64)
}

fn starts_with_solid(bytes: &[u8]) -> bool {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    bytes[start..].starts_with(b"solid")
}

fn parse_binary(bytes: &[u8], path: &Path) -> Result<Vec<Triangle>, StlError> {
    let declared = declared_count(bytes).ok_or(StlError::TooShort {
        path: path.to_path_buf(),
        len: bytes.len(),
    })?;
    let expected = 84 + 50 * declared as u64;
    if expected != bytes.len() as u64 {
        return Err(StlError::CountMismatch {
            path: path.to_path_buf(),
            declared,
            expected,
            len: bytes.len(),
        });
    }
    let mut tris = Vec::with_capacity(declared as usize);
    for (t, rec) in bytes[84..].chunks_exact(50).enumerate() {
        let f = |k: usize| {
            let o = 12 + 4 * k; // skip the 12-byte normal
            f32::from_le_bytes([rec[o], rec[o + 1], rec[o + 2], rec[o + 3]]) as f64
        };
        let tri = [[f(0), f(1), f(2)], [f(3), f(4), f(5)], [f(6), f(7), f(8)]];
        if tri.iter().flatten().any(|c| !c.is_finite()) {
            return Err(StlError::NonFinite {
                path: path.to_path_buf(),
                triangle: t,
            });
        }
        tris.push(tri);
    }
    Ok(tris)
}

fn parse_ascii(bytes: &[u8], path: &Path) -> Result<Vec<Triangle>, StlError> {
    let text = std::str::from_utf8(bytes).map_err(|e| StlError::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.valid_up_to(),
    })?;
    let err = |line: usize, message: String| StlError::Ascii {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut tris = Vec::new();
    let mut verts: Vec<[f64; 3]> = Vec::with_capacity(3);
    let mut in_facet = false;
    let mut ended = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let mut words = raw.split_whitespace();
        let Some(key) = words.next() else { continue };
        if ended {
            return Err(err(line, format!("unexpected `{key}` after `endsolid`")));
        }
        match key {
            "solid" if line == 1 || tris.is_empty() && !in_facet => {}
            "facet" => {
                if in_facet {
                    return Err(err(
                        line,
                        "`facet` inside a facet (missing `endfacet`)".into(),
                    ));
                }
                in_facet = true;
                verts.clear();
            }
            "outer" | "endloop" if in_facet => {}
            "vertex" if in_facet => {
                let mut v = [0.0; 3];
                for c in &mut v {
                    let w = words
                        .next()
                        .ok_or_else(|| err(line, "`vertex` needs 3 coordinates".into()))?;
                    *c = w
                        .parse::<f64>()
                        .map_err(|_| err(line, format!("bad coordinate `{w}`")))?;
                    if !c.is_finite() {
                        return Err(err(line, format!("non-finite coordinate `{w}`")));
                    }
                }
                if verts.len() == 3 {
                    return Err(err(line, "more than 3 vertices in a facet".into()));
                }
                verts.push(v);
            }
            "endfacet" if in_facet => {
                if verts.len() != 3 {
                    return Err(err(
                        line,
                        format!(
                            "facet {} has {} vertices, expected 3",
                            tris.len(),
                            verts.len()
                        ),
                    ));
                }
                tris.push([verts[0], verts[1], verts[2]]);
                in_facet = false;
            }
            "endsolid" if !in_facet => ended = true,
            other => return Err(err(line, format!("unexpected `{other}`"))),
        }
    }
    if in_facet {
        return Err(err(text.lines().count(), "file ends inside a facet".into()));
    }
    Ok(tris)
}

/// Writes triangles as binary STL (used by tests and the shipped example cases).
pub fn write_binary_stl(path: &Path, tris: &[Triangle]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(84 + 50 * tris.len());
    out.extend_from_slice(&[0u8; 80]);
    out.extend_from_slice(&(tris.len() as u32).to_le_bytes());
    for t in tris {
        let e1 = crate::core::vec3::sub(t[1], t[0]);
        let e2 = crate::core::vec3::sub(t[2], t[0]);
        let n = crate::core::vec3::normalize_or_zero(crate::core::vec3::cross(e1, e2));
        for c in n.iter().chain(t.iter().flatten()) {
            out.extend_from_slice(&(*c as f32).to_le_bytes());
        }
        out.extend_from_slice(&[0u8; 2]);
    }
    std::fs::write(path, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ASCII: &str = "solid t\n facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 1 0 0\n   vertex 0 1 0\n  endloop\n endfacet\nendsolid t\n";

    #[test]
    fn ascii_roundtrip() {
        let t = parse_stl(ASCII.as_bytes(), Path::new("a.stl")).unwrap();
        assert_eq!(t, vec![[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]);
    }

    #[test]
    fn binary_roundtrip() {
        let dir = std::env::temp_dir().join(format!("stl-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("b.stl");
        let tri = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.5]];
        write_binary_stl(&p, &[tri, tri]).unwrap();
        assert_eq!(read_stl(&p).unwrap(), vec![tri, tri]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn ascii_errors_name_line() {
        let bad = ASCII.replace("vertex 1 0 0", "vertex 1 zz 0");
        let e = parse_stl(bad.as_bytes(), Path::new("x.stl"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("x.stl:5:"), "{e}");
        let short = ASCII.replace("   vertex 0 1 0\n", "");
        let e = parse_stl(short.as_bytes(), Path::new("x.stl"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("facet 0 has 2 vertices"), "{e}");
    }

    #[test]
    fn binary_count_mismatch() {
        let mut b = vec![0u8; 84 + 50];
        b[80] = 2;
        let e = parse_stl(&b, Path::new("y.stl")).unwrap_err().to_string();
        assert!(e.contains("declares 2 triangles"), "{e}");
    }

    proptest! {
        #[test]
        fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_stl(&bytes, Path::new("r.stl"));
        }

        #[test]
        fn never_panics_on_mutated_ascii(pos in 0usize..200, byte in any::<u8>(), cut in 0usize..220) {
            let mut b = ASCII.as_bytes().to_vec();
            let p = pos % b.len();
            b[p] = byte;
            b.truncate(cut.min(b.len()));
            let _ = parse_stl(&b, Path::new("r.stl"));
        }
    }
}
