//! Compiled kernels kept on disk between runs (issue 13: the main job's first seconds).
//!
//! NVRTC compiles each module for the device's real architecture (`sm_XY`), so it already
//! produces the machine code (a CUBIN); the module is loaded from that, not from PTX, which
//! the driver would compile a second time. The CUBIN is also written to a cache directory, and a
//! later run with the same source, options, architecture and driver loads it without starting
//! NVRTC at all (its compile took 1.3-2.6 s of a fresh H100 machine's first main job).
//!
//! Where: `$PARTICLE_SHM_KERNEL_CACHE` if set (`off` or `0` turns the cache off), else
//! `$XDG_CACHE_HOME/particle-shm/kernels`, else `$HOME/.cache/particle-shm/kernels`. The
//! directory is created owner-only (0700) and each file written owner-only (0600) under a
//! temporary name and renamed, so a reader never sees half a file. A file holds its whole key
//! (source text included) before the CUBIN and a checksum after it, and is used only when the
//! key matches byte for byte and the checksum too: no hash collision can load other kernels,
//! and no damaged file (the driver might load some) runs. Anything wrong with the cache (unreadable,
//! truncated, a CUBIN the driver refuses) means a compile, never a failed run.

use std::io::Write;
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{result, sys};

use super::CudaError;

/// File magic and format version.
const MAGIC: &[u8; 8] = b"PSHMKC01";

/// The cache directory, or None when the cache is off or no directory can be named.
pub fn cache_dir() -> Option<PathBuf> {
    cache_dir_from(|name| std::env::var_os(name))
}

/// [`cache_dir`] with the environment read through `var`.
fn cache_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    if let Some(v) = var("PARTICLE_SHM_KERNEL_CACHE") {
        if v.is_empty() || v == "off" || v == "0" {
            return None;
        }
        return Some(PathBuf::from(v));
    }
    let base = var("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            var("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("particle-shm").join("kernels"))
}

/// Everything the machine code depends on: the architecture, the driver, the options and the
/// source. Two modules with the same key are the same kernels.
pub fn cache_key(arch: &str, driver: i32, options: &[String], source: &str) -> Vec<u8> {
    let mut key = format!("particle-shm kernels\narch {arch}\ndriver {driver}\n");
    for o in options {
        key.push_str("option ");
        key.push_str(o);
        key.push('\n');
    }
    key.push('\n');
    key.push_str(source);
    key.into_bytes()
}

/// FNV-1a (64 bit) of the key, for the file name only (the file holds the whole key).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn file_for(dir: &Path, key: &[u8]) -> PathBuf {
    dir.join(format!("{:016x}.cubin", fnv1a(key)))
}

/// Parses a cache file: the CUBIN if the file is whole and its key is `key`.
fn parse(bytes: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (len, rest) = rest.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    if rest.len() < len || &rest[..len] != key {
        return None;
    }
    let rest = &rest[len..];
    let (n, rest) = rest.split_first_chunk::<8>()?;
    let n = usize::try_from(u64::from_le_bytes(*n)).ok()?;
    if rest.len() != n.checked_add(8)? || n == 0 {
        return None;
    }
    let (cubin, sum) = rest.split_at(n);
    // A damaged CUBIN might still load: its checksum must match.
    (sum == fnv1a(cubin).to_le_bytes()).then(|| cubin.to_vec())
}

/// The cached CUBIN of `key` in `dir`, if there is a whole one.
pub fn load(dir: &Path, key: &[u8]) -> Option<Vec<u8>> {
    let bytes = std::fs::read(file_for(dir, key)).ok()?;
    parse(&bytes, key)
}

/// Writes `cubin` under `key` into `dir` (created owner-only); errors are returned for the
/// caller to log, never to fail a run.
pub fn store(dir: &Path, key: &[u8], cubin: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let path = file_for(dir, key);
    // Unique per process and call: two threads (GPUs of a group) may store the same module.
    static STORES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id(),
        STORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&(key.len() as u64).to_le_bytes())?;
        f.write_all(key)?;
        f.write_all(&(cubin.len() as u64).to_le_bytes())?;
        f.write_all(cubin)?;
        f.write_all(&fnv1a(cubin).to_le_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Compiles `source` with NVRTC with `options` (which name a real architecture, `sm_XY`) and
/// returns its CUBIN; `what` names the module in errors, with NVRTC's log.
pub fn compile_cubin(source: &str, options: &[String], what: &str) -> Result<Vec<u8>, CudaError> {
    compile_cubin_logged(source, options, what).map(|(cubin, _)| cubin)
}

/// NVRTC's log of the live program `prog`, as text (empty where it cannot be read).
///
/// # Safety
/// `prog` is a program NVRTC created and has not destroyed.
unsafe fn program_log(prog: sys::nvrtcProgram) -> String {
    result::get_program_log(prog)
        .map(|l| {
            let bytes: Vec<u8> = l.iter().map(|&c| c as u8).collect();
            String::from_utf8_lossy(&bytes)
                .trim_end_matches('\0')
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// [`compile_cubin`], with NVRTC's log of a successful compile too (its warnings, and ptxas's
/// registers and spills with `--ptxas-options=-v`).
pub fn compile_cubin_logged(
    source: &str,
    options: &[String],
    what: &str,
) -> Result<(Vec<u8>, String), CudaError> {
    let src = std::ffi::CString::new(source)
        .map_err(|_| CudaError::Compile(format!("{what}: the kernel source holds a NUL byte")))?;
    let prog = result::create_program(&src, None)
        .map_err(|e| CudaError::Compile(format!("{what}: creating the NVRTC program: {e:?}")))?;
    // SAFETY: `prog` is the live program created above; it is destroyed once, below, after
    // its last use. The log and CUBIN buffers are sized by NVRTC's own size queries.
    let out = unsafe {
        let compiled = result::compile_program(prog, options);
        match compiled {
            Err(e) => Err(CudaError::Compile(format!(
                "{what}: {e:?}: {}",
                program_log(prog)
            ))),
            Ok(()) => {
                let mut size = 0usize;
                sys::nvrtcGetCUBINSize(prog, &mut size)
                    .result()
                    .map_err(|e| CudaError::Compile(format!("{what}: CUBIN size: {e:?}")))
                    .and_then(|()| {
                        let mut buf = vec![0u8; size];
                        sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut std::ffi::c_char)
                            .result()
                            .map_err(|e| CudaError::Compile(format!("{what}: CUBIN: {e:?}")))
                            .map(|()| (buf, program_log(prog)))
                    })
            }
        }
    };
    // SAFETY: see above; nothing uses `prog` after this.
    let _ = unsafe { result::destroy_program(prog) };
    match out {
        Ok((c, _)) if c.is_empty() => Err(CudaError::Compile(format!(
            "{what}: NVRTC returned no CUBIN (is the architecture real, sm_XY?)"
        ))),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pshm-kc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_stored_module_is_found_under_its_own_key_only() {
        let dir = tmpdir("roundtrip");
        let key = cache_key("sm_90", 13000, &["-DA=1".into()], "kernel text");
        assert!(load(&dir, &key).is_none());
        store(&dir, &key, b"\x7fELF cubin bytes").expect("store");
        assert_eq!(
            load(&dir, &key).as_deref(),
            Some(&b"\x7fELF cubin bytes"[..])
        );
        // Another option, architecture, driver or source is another module.
        for other in [
            cache_key("sm_90", 13000, &["-DA=2".into()], "kernel text"),
            cache_key("sm_80", 13000, &["-DA=1".into()], "kernel text"),
            cache_key("sm_90", 12080, &["-DA=1".into()], "kernel text"),
            cache_key("sm_90", 13000, &["-DA=1".into()], "kernel text "),
        ] {
            assert!(load(&dir, &other).is_none());
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&file_for(&dir, &key)), 0o600);
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn threads_storing_one_module_leave_one_whole_file() {
        let dir = tmpdir("threads");
        let key = cache_key("sm_90", 13000, &[], "same source");
        let cubin: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| store(&dir, &key, &cubin).expect("store"));
            }
        });
        assert_eq!(load(&dir, &key).as_deref(), Some(cubin.as_slice()));
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_files_are_misses_not_errors() {
        let dir = tmpdir("damaged");
        let key = cache_key("sm_90", 13000, &[], "src");
        store(&dir, &key, b"cubin").unwrap();
        let path = file_for(&dir, &key);
        let whole = std::fs::read(&path).unwrap();
        // Every truncation, a flipped key byte and a wrong magic read as a miss.
        for cut in 0..whole.len() {
            std::fs::write(&path, &whole[..cut]).unwrap();
            assert!(load(&dir, &key).is_none(), "cut at {cut}");
        }
        let mut bad = whole.clone();
        bad[20] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert!(load(&dir, &key).is_none());
        let mut bad = whole.clone();
        let in_cubin = whole.len() - 10;
        bad[in_cubin] ^= 0x40;
        std::fs::write(&path, &bad).unwrap();
        assert!(load(&dir, &key).is_none(), "a damaged CUBIN");
        let mut bad = whole.clone();
        bad[0] = b'X';
        std::fs::write(&path, &bad).unwrap();
        assert!(load(&dir, &key).is_none());
        // A file with bytes after its CUBIN is not whole either.
        let mut long = whole;
        long.push(0);
        std::fs::write(&path, &long).unwrap();
        assert!(load(&dir, &key).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_cache_can_be_turned_off_or_moved() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|p| p.0 == name)
                    .map(|p| std::ffi::OsString::from(p.1))
            }
        };
        static HOME: [(&str, &str); 1] = [("HOME", "/home/u")];
        assert_eq!(
            cache_dir_from(env(&HOME)),
            Some(PathBuf::from("/home/u/.cache/particle-shm/kernels"))
        );
        static XDG: [(&str, &str); 2] = [("HOME", "/home/u"), ("XDG_CACHE_HOME", "/c")];
        assert_eq!(
            cache_dir_from(env(&XDG)),
            Some(PathBuf::from("/c/particle-shm/kernels"))
        );
        static OFF: [[(&str, &str); 2]; 3] = [
            [("HOME", "/h"), ("PARTICLE_SHM_KERNEL_CACHE", "off")],
            [("HOME", "/h"), ("PARTICLE_SHM_KERNEL_CACHE", "0")],
            [("HOME", "/h"), ("PARTICLE_SHM_KERNEL_CACHE", "")],
        ];
        for pairs in &OFF {
            assert_eq!(cache_dir_from(env(pairs)), None, "{pairs:?}");
        }
        static MOVED: [(&str, &str); 2] = [("HOME", "/h"), ("PARTICLE_SHM_KERNEL_CACHE", "/tmp/k")];
        assert_eq!(cache_dir_from(env(&MOVED)), Some(PathBuf::from("/tmp/k")));
        // Nowhere to put it: no cache, no error.
        assert_eq!(cache_dir_from(env(&[])), None);
    }
}
