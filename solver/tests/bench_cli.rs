//! The GPU benchmark tool's command line answers without a GPU: `--help` teaches the usage,
//! and an unknown command is named (it was reported as a missing driver on machines without
//! one, and `--help` was taken for an option lacking its value).

use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dem-gpu-bench"))
        .args(args)
        .output()
        .expect("running dem-gpu-bench")
}

#[test]
fn help_prints_the_usage_and_succeeds() {
    for flag in ["--help", "-h", "help"] {
        let out = bench(&[flag]);
        assert!(out.status.success(), "{flag}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("usage: dem-gpu-bench <smoke|") && text.contains("--particles N"),
            "{flag}: {text}"
        );
    }
}

#[test]
fn an_unknown_command_is_named_before_any_gpu_is_probed() {
    let out = bench(&["frob", "--particles", "1e6"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown command frob"), "{err}");
    assert!(err.contains("usage: dem-gpu-bench"), "{err}");
    assert!(!err.contains("driver"), "{err}");
}

#[test]
fn a_bad_frame_pack_is_named_before_any_gpu_is_probed() {
    let out = bench(&["publish", "--frame-pack", "sideways"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--frame-pack takes next, now or both, not sideways"),
        "{err}"
    );
    assert!(!err.contains("driver"), "{err}");
}
