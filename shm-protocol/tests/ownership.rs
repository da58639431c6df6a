//! Names held by dead owners are replaced; names held by live owners are refused; names and
//! permissions are checked; /dev/shm space is checked up front.

mod common;
use common::*;
use shm_protocol::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

fn caps() -> Capacities {
    Capacities::for_particles(100)
}

#[test]
fn stale_segment_of_a_dead_owner_is_replaced_live_one_refused() {
    let name = TestName::new("stale");
    let mut w = Proc::spawn(&["writer", &name.0, "--interval-us", "1000"]);
    let c = attach(&name.0);
    assert!(eventually(Duration::from_secs(5), || c.newest_seq() > 0));
    let err = Publisher::create(&name.0, caps(), CreateOptions::default())
        .err()
        .expect("live owner must be refused");
    assert!(matches!(err, CreateError::InUse { .. }), "{err}");
    assert!(
        err.to_string().contains("in use by a running solver"),
        "{err}"
    );
    w.sigkill();
    let p = Publisher::create(&name.0, caps(), CreateOptions::default()).expect("stale replaced");
    assert_eq!(p.capacities().max_particles, 100);
    assert_eq!(
        Consumer::attach(&name.0).unwrap().newest_seq(),
        0,
        "fresh segment"
    );
}

#[test]
fn foreign_object_with_our_name_is_not_replaced() {
    let name = TestName::new("foreign");
    std::fs::write(shm_path(&name.0), vec![7u8; 4096]).unwrap();
    let err = Publisher::create(&name.0, caps(), CreateOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, CreateError::NotOurs { .. }), "{err}");
    assert_eq!(std::fs::read(shm_path(&name.0)).unwrap(), vec![7u8; 4096]);
    let err = Consumer::attach(&name.0).err().unwrap();
    assert!(matches!(err, AttachError::NotOurs { .. }), "{err}");
}

#[test]
fn segments_are_owner_only_unless_group_access_is_asked() {
    let a = TestName::new("mode600");
    let _p = Publisher::create(&a.0, caps(), CreateOptions::default()).unwrap();
    let mode = std::fs::metadata(shm_path(&a.0))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let b = TestName::new("mode660");
    let _q = Publisher::create(&b.0, caps(), CreateOptions { group_access: true }).unwrap();
    let mode = std::fs::metadata(shm_path(&b.0))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o660);
}

#[test]
fn invalid_names_are_rejected_with_a_reason() {
    for bad in [
        "",
        "a/b",
        "../etc",
        ".hidden",
        "sp ace",
        &"x".repeat(201),
        "ünï",
    ] {
        let err = Publisher::create(bad, caps(), CreateOptions::default())
            .err()
            .unwrap();
        assert!(
            matches!(err, CreateError::InvalidName { .. }),
            "{bad:?}: {err}"
        );
        assert!(matches!(
            Consumer::attach(bad).err().unwrap(),
            AttachError::InvalidName { .. }
        ));
    }
}

#[test]
fn too_large_for_dev_shm_fails_at_creation_with_a_clear_message() {
    let name = TestName::new("huge");
    let mut c = Capacities::for_particles(u32::MAX as u64);
    c.slot_count = 64;
    c.fields = layout::ALL_FIELDS_MASK;
    let err = Publisher::create(&name.0, c, CreateOptions::default())
        .err()
        .unwrap();
    assert!(matches!(err, CreateError::NoSpace { .. }), "{err}");
    assert!(
        err.to_string().contains("not enough space in /dev/shm"),
        "{err}"
    );
    assert!(
        !std::path::Path::new(&shm_path(&name.0)).exists(),
        "nothing left behind"
    );
}

#[test]
fn missing_segment_gives_a_helpful_error() {
    let err = Consumer::attach("pshm-test-does-not-exist").err().unwrap();
    assert!(matches!(err, AttachError::NotFound { .. }));
    assert!(err.to_string().contains("shmctl list"), "{err}");
}
