//! CUDA C sources of the solver, embedded with `include_str!` and compiled at run time with NVRTC
//! by the solver's CUDA backend (issue 4). This crate holds text only, so it builds anywhere.
