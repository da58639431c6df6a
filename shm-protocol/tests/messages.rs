//! Regressions (hardening issue, item 13): misleading messages. A directory at the name was
//! "truncated (0 bytes)", another user's segment "not a particle-shm segment", sizes "0 MiB".

mod common;
use common::*;
use shm_protocol::*;

#[test]
fn a_directory_or_a_link_at_the_name_is_called_what_it_is() {
    let name = TestName::new("dir");
    std::fs::create_dir(shm_path(&name.0)).unwrap();
    let e = Consumer::attach(&name.0).err().unwrap().to_string();
    let _ = std::fs::remove_dir(shm_path(&name.0));
    assert!(e.contains("is a directory"), "{e}");
    assert!(!e.contains("truncated"), "{e}");

    let target = TestName::new("target");
    let _p = Publisher::create(
        &target.0,
        Capacities::for_particles(4),
        CreateOptions::default(),
    )
    .unwrap();
    let link = TestName::new("link");
    std::os::unix::fs::symlink(shm_path(&target.0), shm_path(&link.0)).unwrap();
    let e = Consumer::attach(&link.0).err().unwrap().to_string();
    let _ = std::fs::remove_file(shm_path(&link.0));
    assert!(e.contains("symbolic link"), "{e}");
}

#[test]
fn another_users_segment_is_reported_as_such() {
    let name = TestName::new("otheruser");
    let _p = Publisher::create(
        &name.0,
        Capacities::for_particles(4),
        CreateOptions::default(),
    )
    .unwrap();
    // Probe as user `nobody` (only possible when the tests run as root, as in CI).
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", FIXTURE])
        .args(["probe", &name.0])
        .output();
    let Some(out) = out.ok().filter(|o| o.status.success()) else {
        eprintln!("skipped: cannot run a process as another user here (needs root and setpriv)");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert!(
        text.contains("attach: permission denied")
            && text.contains(&format!("belongs to uid {uid}"))
            && text.contains("--group-access"),
        "{text}"
    );
    assert!(
        text.contains("belongs to another user") && !text.contains("not a particle-shm"),
        "{text}"
    );
}

/// Regression (item 14): a frame whose static generation differs from the static section was
/// paired with it without a word.
#[test]
fn a_frame_of_another_static_generation_is_named_as_such() {
    let name = TestName::new("gen");
    let mut p = Publisher::create(
        &name.0,
        Capacities::for_particles(4),
        CreateOptions::default(),
    )
    .unwrap();
    let stat = StaticData {
        particle_ids: vec![0, 1, 2, 3],
        particle_species: vec![0; 4],
        particle_radius: vec![0.1; 4],
        ..StaticData::default()
    };
    p.write_static(&stat).unwrap();
    let w = p.begin_frame(4).unwrap();
    w.commit();
    let c = Consumer::attach(&name.0).unwrap();
    let frame = c.read_newest().unwrap().unwrap();
    c.read_static().unwrap().check_frame(&frame.meta).unwrap();
    // The static section is rewritten (another run's particles) but no new frame yet.
    p.write_static(&stat).unwrap();
    let e = c
        .read_static()
        .unwrap()
        .check_frame(&frame.meta)
        .unwrap_err();
    assert!(matches!(e, ReadError::StaticMismatch { .. }), "{e}");
    assert!(e.to_string().contains("static data generation"), "{e}");
}
