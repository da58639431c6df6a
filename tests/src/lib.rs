//! Helpers for the multi-process tests in `tests/tests/`.
