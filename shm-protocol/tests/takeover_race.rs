//! Regression (hardening issue, item 2): two `solver --load-shm NAME` started together both took
//! the segment over (16 of 20 rounds) and wrote into it at once. Taking over is now atomic:
//! of 8 processes racing for a stale segment exactly one wins, and the others are told who.

mod common;
use common::*;
use shm_protocol::*;
use std::time::Duration;

#[test]
fn of_eight_resumers_started_together_exactly_one_takes_over() {
    let name = TestName::new("race");
    let mut w = Proc::spawn(&["writer", &name.0, "--interval-us", "1000", "--keep"]);
    let c = attach(&name.0);
    assert!(eventually(Duration::from_secs(5), || c.newest_seq() > 0));
    w.sigkill();
    for round in 0..12 {
        // Everyone spins until the same instant, well after all have started.
        let at = sys::monotonic_ns() + 300_000_000;
        let mut racers: Vec<Proc> = (0..8)
            .map(|_| Proc::spawn(&["take-over", &name.0, "--at-ns", &at.to_string()]))
            .collect();
        let lines: Vec<String> = racers.iter_mut().map(|p| p.line()).collect();
        let winners: Vec<usize> = (0..8).filter(|&i| lines[i] == "won").collect();
        assert_eq!(winners.len(), 1, "round {round}: {lines:#?}");
        let winner = racers[winners[0]].0.id();
        assert_eq!(c.status().owner_pid, winner, "round {round}");
        for (i, l) in lines.iter().enumerate() {
            if i != winners[0] {
                assert!(
                    l.starts_with("lost: ") && l.contains(&format!("pid {winner}")),
                    "round {round}: a loser must name the winner (pid {winner}): {l}"
                );
            }
        }
        // The winner dies too: the segment is stale again for the next round.
        racers[winners[0]].sigkill();
        assert!(eventually(Duration::from_secs(2), || !c.status().alive));
    }
}
