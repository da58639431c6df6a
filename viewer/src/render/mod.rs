//! Renderers that run without a GPU: the CPU rasteriser, its legend and its font.

pub mod cpu;
mod font;
pub mod legend;
#[cfg(test)]
mod mesh_tests;
