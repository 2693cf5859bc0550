//! The verification page's chart, drawn on the server as inline SVG: one
//! bar per time bucket for the volume (verifications and rejections) and a
//! line for the success share (completed over all rows of the bucket).
//!
//! The SVG holds only numbers and the dates passed in, which are digits
//! and dashes, so it needs no escaping.
//!
//! Not for: counting (`dialproof_storage::Totals`).

use dialproof_storage::Counts;
use std::fmt::Write;

const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 180.0;
/// Room at the bottom for the date labels and at the top for the maximum.
const MARGIN: f64 = 18.0;

/// The chart of `buckets`, first to last, labelled with the period's first
/// and last day (`YYYY-MM-DD`).
pub fn svg(buckets: &[Counts], first_day: &str, last_day: &str) -> String {
    let n = buckets.len().max(1) as f64;
    let max = buckets.iter().map(|b| b.all).max().unwrap_or(0).max(1) as f64;
    let plot = HEIGHT - 2.0 * MARGIN;
    let slot = WIDTH / n;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" aria-label=\"Объём проверок и доля успешных по времени\" class=\"chart\">"
    );
    let mut line = Vec::new();
    for (i, b) in buckets.iter().enumerate() {
        let x = i as f64 * slot;
        let h = b.all as f64 / max * plot;
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#9bb7d4\">\
             <title>{} / {}</title></rect>",
            x + slot * 0.1,
            MARGIN + plot - h,
            slot * 0.8,
            b.completed,
            b.all
        );
        if b.all > 0 {
            let share = b.completed as f64 / b.all as f64;
            line.push(format!(
                "{:.1},{:.1}",
                x + slot / 2.0,
                MARGIN + plot - share * plot
            ));
        }
    }
    if !line.is_empty() {
        let _ = write!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#1a7f37\" stroke-width=\"2\"/>",
            line.join(" ")
        );
    }
    let _ = write!(
        s,
        "<text x=\"2\" y=\"12\" font-size=\"11\">макс. {max}</text>\
         <text x=\"2\" y=\"{:.0}\" font-size=\"11\">{first_day}</text>\
         <text x=\"{WIDTH}\" y=\"{:.0}\" font-size=\"11\" text-anchor=\"end\">{last_day}</text></svg>",
        HEIGHT - 4.0,
        HEIGHT - 4.0
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_share_points_follow_the_buckets() {
        let b = [
            Counts {
                all: 4,
                completed: 2,
            },
            Counts {
                all: 0,
                completed: 0,
            },
            Counts {
                all: 2,
                completed: 2,
            },
        ];
        let s = svg(&b, "2026-01-01", "2026-01-03");
        assert_eq!(s.matches("<rect").count(), 3);
        // A bucket without rows has no share point.
        let points = s
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(points.split(' ').count(), 2);
        assert!(s.contains("<title>2 / 4</title>"));
        assert!(s.ends_with("</svg>"));
    }
}
