//! Inflow and outflow end to end (issue 20, items 1 and 2): the real solver binary on the
//! shipped silo case, a real segment. Frames of a run whose particle set changes carry the live
//! ids (ascending, within the static section's ids, which are 0..N and indexed by id), their
//! count follows the inflow and the outflow, and the slot header counts the removed particles
//! and their mass; the static section knows the species of every particle any frame names.

use e2e_tests::*;
use shm_protocol::{Consumer, FieldKind, StaticData};
use std::path::Path;
use std::time::{Duration, Instant};

#[test]
fn frames_follow_inflow_and_outflow() {
    let seg = SegName::new("flow");
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("../solver/cases/silo.toml");
    let case = case.to_string_lossy().to_string();
    // 1.1 s: filled by 0.6 s, the gate opens at 0.8 s, discharge under way by 1.1 s.
    let args = [
        "--name-shm",
        &seg.0,
        "--backend",
        "cpu",
        "--case",
        &case,
        "--end-time",
        "1.1",
        "--refresh",
        "0.05",
        "--keep-shm",
    ];
    let run = Running::spawn(solver(&args));
    let c = poll(Duration::from_secs(30), || Consumer::attach(&seg.0).ok())
        .expect("the solver creates its segment");
    let stat = poll(Duration::from_secs(30), || c.read_static().ok()).expect("static data");
    let n_static = stat.particle_ids.len();
    assert_eq!(
        stat.particle_ids,
        (0..n_static as u32).collect::<Vec<_>>(),
        "static ids are 0..N, indexed by id"
    );
    assert!(
        c.region().capacities().fields & FieldKind::ParticleId.bit() != 0,
        "a run whose particle set changes reserves particle ids"
    );
    let mut counts = Vec::new();
    let mut last_seq = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(120) {
        if let Some(f) = c.read_newest().expect("read") {
            if f.meta.seq != last_seq {
                last_seq = f.meta.seq;
                let ids = f.particle_ids.clone().expect("every frame carries the ids");
                assert_eq!(ids.len() as u64, f.meta.particle_count);
                assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids ascending");
                assert!(ids.iter().all(|&id| (id as usize) < n_static));
                let species = StaticData::per_element(&stat.particle_species, Some(&ids))
                    .expect("species of every live id");
                assert_eq!(species.len(), ids.len());
                counts.push((
                    f.meta.sim_time,
                    ids.len(),
                    f.meta.removed_count,
                    f.meta.removed_mass,
                ));
                if f.meta.sim_time >= 1.1 - 1e-9 {
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, err) = run.wait_exit(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    println!("(t, live, removed, removed kg): {counts:?}");
    let at = |t: f64| {
        counts
            .iter()
            .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
            .copied()
            .expect("frames")
    };
    let (fill, end) = (at(0.7), at(1.1));
    assert!(
        fill.1 > 1000 && fill.2 == 0,
        "filled, nothing removed by 0.7 s: {fill:?}"
    );
    assert!(end.2 > 0 && end.3 > 0.0, "discharging by 1.1 s: {end:?}");
    assert_eq!(
        end.1 as u64,
        fill.1 as u64 - end.2,
        "live = filled - removed"
    );
    assert!(
        n_static >= fill.1,
        "static lists every particle the inflow will add"
    );
    let _ = shm_protocol::segment::unlink(&seg.0);
}
