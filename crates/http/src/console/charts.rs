//! Charts as SVG drawn by the server: no script, no library, readable by screen readers (each
//! chart has a title and each bar a `<title>` with its figures), and scaled by the browser.

use std::fmt::Write as _;

use agentry_domain::mail::escape_html;

/// One stacked series of a bar chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Its name in the legend and the bars' titles.
    pub label: String,
    /// Its colour (a CSS colour).
    pub color: &'static str,
    /// One value per bar.
    pub values: Vec<u64>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 24.0;
const TOP: f64 = 10.0;

/// A stacked bar chart: one bar per label, its series stacked in order. `every` labels every
/// n-th bar on the axis (all bars keep their title).
pub fn stacked_bars(title: &str, labels: &[String], series: &[Series], every: usize) -> String {
    let bars = labels.len().max(1);
    let totals: Vec<u64> = (0..labels.len())
        .map(|i| series.iter().map(|s| s.values.get(i).copied().unwrap_or(0)).sum())
        .collect();
    let max = nice_ceiling(totals.iter().copied().max().unwrap_or(0));
    let plot_w = WIDTH - LEFT - 4.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    #[allow(clippy::cast_precision_loss)] // Charts count in the thousands at most.
    let (slot, scale) = (plot_w / bars as f64, plot_h / max as f64);
    let title = escape_html(title);
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-labelledby=\"chart-title\" \
         xmlns=\"http://www.w3.org/2000/svg\"><title id=\"chart-title\">{title}</title>"
    );
    // Three grid lines with their values.
    for step in 0..=2_u64 {
        let value = max * step / 2;
        #[allow(clippy::cast_precision_loss)]
        let y = TOP + plot_h - value as f64 * scale;
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{WIDTH}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#dde1e6\"/>\
             <text x=\"{x:.1}\" y=\"{ty:.1}\" text-anchor=\"end\">{value}</text>",
            x = LEFT - 4.0,
            ty = y + 3.0,
        );
    }
    for (i, label) in labels.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let w = (slot * 0.7).max(1.0);
        let mut y = TOP + plot_h;
        let figures: Vec<String> = series
            .iter()
            .map(|s| format!("{} {}", s.values.get(i).copied().unwrap_or(0), escape_html(&s.label)))
            .collect();
        let _ = write!(svg, "<g><title>{}: {}</title>", escape_html(label), figures.join(", "));
        for s in series {
            let value = s.values.get(i).copied().unwrap_or(0);
            if value == 0 {
                continue;
            }
            #[allow(clippy::cast_precision_loss)]
            let h = value as f64 * scale;
            y -= h;
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{}\"/>",
                s.color
            );
        }
        svg.push_str("</g>");
        if every > 0 && i % every == 0 {
            let _ = write!(
                svg,
                "<text x=\"{cx:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\">{}</text>",
                escape_html(label),
                cx = x + w / 2.0,
                ly = HEIGHT - 8.0,
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// The legend of `series`, as HTML.
pub fn legend(series: &[Series]) -> String {
    let items: Vec<String> = series
        .iter()
        .map(|s| format!("<span style=\"color:{}\">{}</span>", s.color, escape_html(&s.label)))
        .collect();
    format!("<p class=\"legend\">{}</p>", items.join(""))
}

/// The smallest of 1, 2 or 5 times a power of ten at or above `n` (at least 1): the axis's top.
fn nice_ceiling(n: u64) -> u64 {
    let mut power = 1_u64;
    loop {
        for m in [1, 2, 5] {
            if m * power >= n {
                return m * power;
            }
        }
        power = power.saturating_mul(10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axis_ends_at_a_round_number() {
        let cases = [(0, 1), (1, 1), (3, 5), (7, 10), (11, 20), (49, 50), (51, 100), (2001, 5000)];
        for (n, top) in cases {
            assert_eq!(nice_ceiling(n), top, "{n}");
        }
    }

    #[test]
    fn bars_stack_their_series_and_every_figure_is_in_a_title() {
        let labels = vec!["10:00".to_owned(), "11:00".to_owned()];
        let series = vec![
            Series { label: "delivered".into(), color: "#17693a", values: vec![3, 0] },
            Series { label: "failed".into(), color: "#a4161a", values: vec![2, 1] },
        ];
        let svg = stacked_bars("Deliveries <per hour>", &labels, &series, 1);
        assert!(svg.contains("<title id=\"chart-title\">Deliveries &lt;per hour&gt;</title>"));
        assert!(svg.contains("<title>10:00: 3 delivered, 2 failed</title>"));
        assert!(svg.contains("<title>11:00: 0 delivered, 1 failed</title>"));
        // Three bars drawn (a zero draws none); the axis tops at 5.
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains(">5</text>"));
    }
}
