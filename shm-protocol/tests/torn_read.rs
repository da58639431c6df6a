//! A writer publishes checksummed frames as fast as it can while reader processes verify every
//! frame they see, by copy and by zero-copy view: no torn frame may ever be returned.

mod common;
use common::*;

#[test]
fn no_torn_frames_over_100k_publications() {
    let name = TestName::new("torn");
    let readers: Vec<Proc> = (0..3)
        .map(|i| {
            let mut args = vec!["reader", name.0.as_str()];
            if i == 0 {
                args.push("--views");
            }
            Proc::spawn(&args)
        })
        .collect();
    let writer = fixture(&[
        "writer",
        &name.0,
        "--particles",
        "2048",
        "--frames",
        "100000",
        "--keep",
    ])
    .status()
    .expect("writer runs");
    assert!(writer.success());
    let mut total_seen = 0;
    for mut r in readers {
        let out = std::mem::take(&mut r.line());
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{out}: {e}"));
        assert_eq!(v["bad"], 0, "torn or corrupt frame returned: {v}");
        assert_eq!(
            v["last"], 100000,
            "reader did not reach the final frame: {v}"
        );
        assert!(
            v["seen"].as_u64().unwrap() > 100,
            "reader saw too few frames: {v}"
        );
        total_seen += v["seen"].as_u64().unwrap();
        r.0.wait().unwrap();
    }
    eprintln!("readers verified {total_seen} frames in total");
}
