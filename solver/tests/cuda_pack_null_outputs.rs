//! Regression (hardening issue, item 5, code review of the CUDA backend): `dem_pack` wrote
//! positions even when the caller passed a null pointer for them (`FrameTarget` documents every
//! output as optional, and `CudaSim::publish_async` passes 0 for an unwanted array), which is a
//! device fault for a frame without positions. The kernel cannot run here (no GPU); this checks
//! its source: every store through an output pointer of `dem_pack` sits under a null test of
//! that pointer. (The overflow and history-export fixes have unit tests in
//! `solver::dem::cuda::{step, buffers}`.)

#[test]
fn dem_pack_tests_every_output_for_null_before_writing() {
    let src = kernels::Source::Publish.text();
    let start = src.find("void dem_pack(").expect("dem_pack is defined");
    let body = &src[start..];
    let body = &body[..body.find("\n}").expect("end of dem_pack")];
    let outputs = ["pos", "vel", "omega", "force", "contacts"];
    let mut guarded = None::<&str>;
    for line in body.lines().skip(2) {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("if (") {
            guarded = outputs
                .iter()
                .copied()
                .find(|o| rest.starts_with(&format!("{o})")));
            if t.ends_with(';') {
                // One-line form `if (contacts) contacts[i] = ...;`, or another test
                // (`if (k >= p.n) return;`), which must not write an output.
                for o in outputs {
                    if t.contains(&format!("{o}[")) {
                        assert_eq!(guarded, Some(o), "{t}");
                    }
                }
                guarded = None;
            }
            continue;
        }
        for o in outputs {
            if t.contains(&format!(" {o}[")) || t.starts_with(&format!("{o}[")) {
                assert_eq!(
                    guarded,
                    Some(o),
                    "dem_pack writes `{o}` without testing it for null: {t}"
                );
            }
        }
        guarded = None;
    }
}
