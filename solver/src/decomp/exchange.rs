//! Who sends what to whom when the coordinator exchanges: particles that left their slab go to
//! the owner of their new cell layer; each worker's first and last owned layers go to the
//! neighbours below and above as their ghost layers.

use super::plan::Plan;

/// One halo message: the owned layer `layer` of a worker goes to worker `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HaloRoute {
    pub layer: u32,
    pub to: usize,
}

/// The halo messages worker `w` sends (none for a single worker). A slab one layer thick sends
/// the same layer both ways.
pub fn halo_routes(plan: &Plan, w: usize) -> Vec<HaloRoute> {
    let slab = plan.slab(w);
    let mut routes = Vec::new();
    if w > 0 {
        routes.push(HaloRoute {
            layer: slab.start,
            to: w - 1,
        });
    }
    if w + 1 < plan.workers() {
        routes.push(HaloRoute {
            layer: slab.end - 1,
            to: w + 1,
        });
    }
    routes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ghost_layer_is_sent_by_its_owner() {
        let plan = Plan {
            axis: 0,
            bounds: vec![0, 3, 4, 9],
        };
        for w in 0..plan.workers() {
            let win = plan.window(w);
            let slab = plan.slab(w);
            // The ghost layers of w are exactly the layers routed to w.
            let mut ghosts: Vec<u32> = (0..plan.workers())
                .flat_map(|v| halo_routes(&plan, v))
                .filter(|r| r.to == w)
                .map(|r| r.layer)
                .collect();
            ghosts.sort();
            let expected: Vec<u32> = win.filter(|l| !slab.contains(l)).collect();
            assert_eq!(ghosts, expected, "worker {w}");
        }
    }
}
