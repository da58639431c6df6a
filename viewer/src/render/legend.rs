//! Text, colour legend and caption drawn into a CPU-rendered image.

use super::cpu::Image;
use super::font::{GLYPHS, GLYPH_H, GLYPH_W};
use crate::color::{viridis, Legend, Rgb};

const TEXT: Rgb = [230, 232, 238];
const PANEL: Rgb = [10, 11, 14];

/// Draws `s` with its top-left corner at (x, y), each font pixel `scale` pixels wide.
pub fn draw_text(img: &mut Image, x: i64, y: i64, s: &str, color: Rgb, scale: i64) {
    for (i, ch) in s.chars().enumerate() {
        let code = ch as u32;
        let glyph = if (32..=126).contains(&code) {
            &GLYPHS[(code - 32) as usize]
        } else {
            &GLYPHS[(b'?' - 32) as usize]
        };
        let gx = x + i as i64 * GLYPH_W as i64 * scale;
        for (row, bits) in glyph.iter().enumerate() {
            for col in 0..GLYPH_W {
                if bits >> col & 1 == 1 {
                    for sy in 0..scale {
                        for sx in 0..scale {
                            img.blend(
                                gx + col as i64 * scale + sx,
                                y + row as i64 * scale + sy,
                                color,
                                1.0,
                            );
                        }
                    }
                }
            }
        }
    }
}

pub fn text_width(s: &str, scale: i64) -> i64 {
    s.chars().count() as i64 * GLYPH_W as i64 * scale
}

fn fill(img: &mut Image, x: i64, y: i64, w: i64, h: i64, c: Rgb, alpha: f32) {
    for yy in y..y + h {
        for xx in x..x + w {
            img.blend(xx, yy, c, alpha);
        }
    }
}

/// Compact number formatting for legend labels.
pub fn format_value(v: f32) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if (0.01..10_000.0).contains(&a) {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.2e}")
    }
}

/// Text scale for an image of this size (legible at 640x480 and at 4K).
pub fn text_scale(img: &Image) -> i64 {
    ((img.height.min(img.width * 3 / 4) / 700) as i64 + 1).clamp(1, 4)
}

/// Draws the legend in the top-right corner.
pub fn draw_legend(img: &mut Image, legend: &Legend) {
    let s = text_scale(img);
    let line = (GLYPH_H as i64 + 3) * s;
    let pad = 6 * s;
    match legend {
        Legend::Categories { title, entries } => {
            let shown = entries.len().min(12);
            let width = entries
                .iter()
                .take(shown)
                .map(|(n, _)| text_width(n, s) + line + pad)
                .chain([text_width(title, s)])
                .max()
                .unwrap_or(0)
                + 2 * pad;
            let height = line * (shown as i64 + 1) + 2 * pad;
            let x = img.width as i64 - width - pad;
            fill(img, x, pad, width, height, PANEL, 0.75);
            draw_text(img, x + pad, 2 * pad, title, TEXT, s);
            for (k, (name, color)) in entries.iter().take(shown).enumerate() {
                let y = 2 * pad + line * (k as i64 + 1);
                fill(img, x + pad, y, line - 3 * s, line - 3 * s, *color, 1.0);
                draw_text(img, x + pad + line, y, name, TEXT, s);
            }
        }
        Legend::Ramp { title, min, max } => {
            let (lo, hi) = (format_value(*min), format_value(*max));
            let bar_w = 14 * s;
            let bar_h = (img.height as i64 / 3).max(40);
            let labels = text_width(&lo, s).max(text_width(&hi, s));
            let width = (bar_w + pad + labels).max(text_width(title, s)) + 2 * pad;
            let height = bar_h + line + 3 * pad;
            let x = img.width as i64 - width - pad;
            fill(img, x, pad, width, height, PANEL, 0.75);
            draw_text(img, x + pad, 2 * pad, title, TEXT, s);
            let top = 2 * pad + line;
            for yy in 0..bar_h {
                let c = viridis(1.0 - yy as f32 / (bar_h - 1).max(1) as f32);
                fill(img, x + pad, top + yy, bar_w, 1, c, 1.0);
            }
            draw_text(img, x + 2 * pad + bar_w, top, &hi, TEXT, s);
            draw_text(
                img,
                x + 2 * pad + bar_w,
                top + bar_h - GLYPH_H as i64 * s,
                &lo,
                TEXT,
                s,
            );
        }
    }
}

/// Draws a one-line caption in the bottom-left corner.
pub fn draw_caption(img: &mut Image, caption: &str) {
    let s = text_scale(img);
    let pad = 6 * s;
    let h = GLYPH_H as i64 * s + pad;
    let y = img.height as i64 - h - pad;
    fill(img, pad, y, text_width(caption, s) + pad, h, PANEL, 0.6);
    draw_text(img, pad + pad / 2, y + pad / 2, caption, TEXT, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_values() {
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_value(1.5), "1.5");
        assert_eq!(format_value(2.0), "2");
        assert_eq!(format_value(1.0e6), "1.00e6");
    }

    #[test]
    fn text_is_drawn() {
        let mut img = Image::new(40, 20, [0, 0, 0]);
        draw_text(&mut img, 0, 0, "8", TEXT, 1);
        assert!(img.pixels.contains(&TEXT));
    }
}
