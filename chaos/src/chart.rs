//! The run's chart (SVG): write latency (p50, p99) and throughput per second, with the fault
//! windows shaded, so an outage and the fault that caused it are seen together.

use std::path::Path;

use plotters::prelude::*;

use crate::history::FaultWindow;
use crate::verdict::{ReportError, Second};

/// Draws `timeline` and `faults` into the SVG file `path`.
pub fn draw(path: &Path, timeline: &[Second], faults: &[FaultWindow]) -> Result<(), ReportError> {
    let error = |e: String| ReportError {
        path: path.display().to_string(),
        message: e,
    };
    draw_inner(path, timeline, faults).map_err(|e| error(e.to_string()))
}

/// One line of a panel: its label, colour and points (seconds, value).
type Series = (&'static str, RGBColor, Vec<(f64, f64)>);

fn draw_inner(
    path: &Path,
    timeline: &[Second],
    faults: &[FaultWindow],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1100, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(320);
    let t_max = timeline.len().max(1) as f64;
    let points = |f: fn(&Second) -> Option<f64>| -> Vec<(f64, f64)> {
        timeline
            .iter()
            .filter_map(|s| f(s).map(|v| (s.t + 0.5, v)))
            .collect()
    };
    let latency = [
        ("p50", BLUE, points(|s| s.p50_ms)),
        ("p99", MAGENTA, points(|s| s.p99_ms)),
    ];
    panel(
        &top,
        "write latency (ms); shaded: faults",
        "ms",
        t_max,
        faults,
        &latency,
    )?;
    let throughput = [
        ("acknowledged", GREEN, points(|s| Some(s.ok_writes as f64))),
        ("5xx / unanswered", RED, points(|s| Some(s.failed_writes as f64))),
    ];
    panel(
        &bottom,
        "writes per second",
        "writes/s",
        t_max,
        faults,
        &throughput,
    )?;
    root.present()?;
    Ok(())
}

/// Draws one panel: the fault windows shaded, then each series as a line with a legend.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    unit: &str,
    t_max: f64,
    faults: &[FaultWindow],
    series: &[Series],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let y_max = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|&(_, y)| y))
        .fold(10.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)?;
    chart.configure_mesh().x_desc("seconds").y_desc(unit).draw()?;
    let shade = RGBColor(230, 80, 60).mix(0.18);
    chart.draw_series(
        faults
            .iter()
            .map(|f| Rectangle::new([(f.start, 0.0), (f.end, y_max)], shade.filled())),
    )?;
    for (label, color, points) in series {
        let color = *color;
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color))?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    Ok(())
}
