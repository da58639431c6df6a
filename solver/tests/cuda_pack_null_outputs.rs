//! Regression (hardening issue, item 5, code review of the CUDA backend): `dem_pack` wrote
//! positions even when the caller passed a null pointer for them (`FrameTarget` documents every
//! output as optional, and `CudaSim::publish_async` passes 0 for an unwanted array), which is a
//! device fault for a frame without positions. The kernel cannot run here (no GPU); this checks
//! its source: every store through an output pointer of `dem_pack`, and of `dem_frame_put`,
//! which writes the kinematics for it and for a collide that packs a deferred frame, sits under
//! a null test of that pointer. (The overflow and history-export fixes have unit tests in
//! `solver::dem::cuda::{step, buffers}`.)

/// The body of the function whose definition starts with `signature`.
fn body<'a>(src: &'a str, signature: &str) -> &'a str {
    let start = src
        .find(signature)
        .unwrap_or_else(|| panic!("{signature} is defined"));
    let body = &src[start..];
    let open = body.find('{').expect("a body");
    &body[open + 1..body.find("\n}").expect("the end of the body")]
}

/// The output that `stmt` stores through, if any: `out[...] = ...`, also as the body of a
/// one-line `for (...)`.
fn stored<'o>(stmt: &str, outputs: &[&'o str]) -> Option<&'o str> {
    let mut s = stmt.trim();
    if let Some(rest) = s.strip_prefix("for (") {
        s = rest[rest.find(") ").expect("a for header") + 2..].trim();
    }
    outputs
        .iter()
        .copied()
        .find(|o| s.starts_with(&format!("{o}[")))
}

/// Asserts that every store of `body` through one of `outputs` is guarded by `if (output)`: a
/// one-line `if`, an `if` whose statement is the next line, or an `if (...) {` block.
fn assert_guarded(name: &str, body: &str, outputs: &[&str]) {
    let mut blocks: Vec<Option<String>> = Vec::new();
    let mut next: Option<String> = None;
    let mut stores = 0;
    for line in body.lines() {
        let t = line.trim();
        let guarded = |o: &str, next: &Option<String>, blocks: &[Option<String>]| {
            next.as_deref() == Some(o) || blocks.iter().any(|b| b.as_deref() == Some(o))
        };
        if let Some(rest) = t.strip_prefix("if (") {
            let close = rest.find(')').expect("a condition");
            let cond = rest[..close].to_string();
            let tail = rest[close + 1..].trim();
            if tail == "{" {
                blocks.push(Some(cond));
            } else if tail.is_empty() {
                next = Some(cond);
            } else if let Some(o) = stored(tail, outputs) {
                // One line: `if (contacts) contacts[i] = ...;`, or another test
                // (`if (k >= p.n) return;`), which must not store.
                assert_eq!(cond, o, "{name} stores `{o}` under another test: {t}");
                stores += 1;
            }
            continue;
        }
        if t.ends_with('{') {
            blocks.push(None);
        }
        if let Some(o) = stored(t, outputs) {
            assert!(
                guarded(o, &next, &blocks),
                "{name} stores `{o}` without testing it for null: {t}"
            );
            stores += 1;
        }
        if t.starts_with('}') {
            blocks.pop();
        }
        if !t.is_empty() {
            next = None;
        }
    }
    assert!(
        stores > 0,
        "{name}: no store found (the check reads nothing)"
    );
}

#[test]
fn dem_pack_tests_every_output_for_null_before_writing() {
    let src = kernels::Source::Publish.text();
    let pack = body(src, "void dem_pack(");
    assert_guarded(
        "dem_pack",
        pack,
        &["pos", "vel", "omega", "force", "contacts"],
    );
    assert!(
        pack.contains("dem_frame_put("),
        "dem_pack writes the kinematics through dem_frame_put"
    );
    let put = body(src, "void dem_frame_put(");
    assert_guarded("dem_frame_put", put, &["f.pos", "f.vel", "f.omega"]);
}

#[test]
fn the_guard_check_catches_an_unguarded_store() {
    let bad = "\n    if (f.pos) {\n        f.pos[0] = x;\n    }\n    f.vel[0] = y;\n";
    let caught = std::panic::catch_unwind(|| assert_guarded("bad", bad, &["f.pos", "f.vel"]));
    assert!(caught.is_err());
    let bad = "\n    if (vel) pos[0] = x;\n";
    let caught = std::panic::catch_unwind(|| assert_guarded("bad", bad, &["pos", "vel"]));
    assert!(caught.is_err());
    let good = "\n    if (force)\n        for (int a = 0; a < 3; a++) force[a] = 0.0f;\n";
    assert_guarded("good", good, &["force"]);
}

#[test]
fn the_collide_packs_a_deferred_frame_only_when_given_one() {
    let src = kernels::Source::Contact.text();
    let puts: Vec<&str> = src
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("dem_frame_put("))
        .collect();
    assert_eq!(puts.len(), 1, "{puts:?}");
    assert!(
        puts[0].starts_with("if (fr.pos) dem_frame_put("),
        "{}",
        puts[0]
    );
}
