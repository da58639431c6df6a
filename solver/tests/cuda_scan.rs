//! The counting sorts' exclusive scan on the GPU (`scan_tile`, `scan_add` in cells.cu) against
//! the host's prefix sums, at sizes around its tile (1024 elements, 4 per thread) and its
//! levels, with lengths that are not multiples of 4 (the kernels' scalar tails) and a grid's
//! size. Runs only where an NVIDIA driver loads; elsewhere it prints "skipped: no GPU".

use solver::dem::cuda::{driver, scan_on_device};

fn gpu_present() -> bool {
    if driver::driver_available().is_err() {
        println!("skipped: no GPU");
        return false;
    }
    true
}

/// Counts as a sort's cells hold them: mostly zero, runs of small counts, a few large.
fn counts(n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 16 {
                0..=9 => 0,
                10..=14 => (x >> 8) as u32 % 8,
                _ => (x >> 8) as u32 % 300,
            }
        })
        .collect()
}

#[test]
fn the_scan_gives_the_host_prefix_sums() {
    if !gpu_present() {
        return;
    }
    let sizes = [
        0usize,
        1,
        2,
        3,
        4,
        5,
        31,
        255,
        1023,
        1024,
        1025,
        4097,
        65_535,
        1_048_576,
        1_048_577 + 2,
        3_000_001,
        40_000_003,
    ];
    for (k, &n) in sizes.iter().enumerate() {
        let input = counts(n, 0x9e37_79b9_7f4a_7c15 ^ k as u64);
        let got = scan_on_device(0, &input).expect("scan on GPU 0");
        let mut run = 0u32;
        let want: Vec<u32> = input
            .iter()
            .map(|&c| {
                let v = run;
                run = run.wrapping_add(c);
                v
            })
            .collect();
        assert_eq!(got.len(), n, "length of the scan of {n} elements");
        if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
            panic!(
                "the scan of {n} elements differs first at {i}: {} on the GPU, {} on the host",
                got[i], want[i]
            );
        }
    }
}
