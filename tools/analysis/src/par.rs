//! Fixed-size parallel chunks for the per-particle passes.
//!
//! Every pass splits `0..n` into the same consecutive chunks and combines the per-chunk results
//! in chunk order, so floating-point sums do not depend on the thread schedule (a metric gives
//! the same bits on every run and thread count), and each chunk is a plain loop the compiler
//! can keep in registers.

use std::ops::Range;

use rayon::prelude::*;

/// Particles per task: large enough that scheduling is negligible, small enough that 10 M
/// particles give every core of a large machine many tasks.
pub const CHUNK: usize = 1 << 15;

/// `f` on each chunk of `0..n`, in parallel; the results in chunk order.
pub fn map_chunks<T: Send>(n: usize, f: impl Fn(Range<usize>) -> T + Sync + Send) -> Vec<T> {
    (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| f(c * CHUNK..((c + 1) * CHUNK).min(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_range_once_in_order() {
        for n in [0, 1, CHUNK - 1, CHUNK, 3 * CHUNK + 5] {
            let ranges = map_chunks(n, |r| r);
            let flat: Vec<usize> = ranges.into_iter().flatten().collect();
            assert_eq!(flat, (0..n).collect::<Vec<_>>());
        }
    }
}
