//! Line charts as PNG files, for the experiments' figures.
//!
//! Drawn with plotters into an RGB buffer and encoded as PNG. The text is rasterised from a
//! font compiled into the program (Ubuntu Light from `epaint_default_fonts`), so a figure
//! looks the same on every machine and needs no installed font.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::FontStyle;
use thiserror::Error;

/// The family name the embedded font is registered under.
const FAMILY: &str = "sans-serif";

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Points, in the order they are joined.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Logarithmic x axis (base 2 ticks; every x must be positive).
    pub log_x: bool,
    /// Logarithmic y axis (every y must be positive; `y_min` is then ignored).
    pub log_y: bool,
    /// Draw a marker at each point.
    pub markers: bool,
    /// Lower bound of the y axis (the upper one is 5 % above the largest y).
    pub y_min: f64,
    /// Where the legend goes.
    pub legend: Legend,
    /// Picture size in pixels.
    pub size: (u32, u32),
    /// The lines.
    pub series: Vec<Series>,
}

/// A corner of the plot for the legend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legend {
    /// Top left.
    UpperLeft,
    /// Bottom right.
    LowerRight,
}

/// A chart that could not be drawn or written.
#[derive(Debug, Error)]
pub enum PlotError {
    /// A chart with no point, or a non-positive x on a logarithmic axis.
    #[error("nothing to plot: {0}")]
    Empty(&'static str),
    /// The drawing or the PNG file failed.
    #[error("drawing {path}: {message}")]
    Draw {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(
            FAMILY,
            FontStyle::Normal,
            epaint_default_fonts::UBUNTU_LIGHT,
        )
        .is_err()
        {
            tracing::warn!("the embedded font did not load; figure text will be missing");
        }
    });
}

/// Line colours, one per series in turn (colour-blind safe, Okabe–Ito).
const COLOURS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

/// Draws `chart` into the PNG file `path`.
pub fn draw_png(chart: &Chart, path: &Path) -> Result<(), PlotError> {
    let xs = || {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
    };
    let (Some(x_min), Some(x_max)) = (xs().reduce(f64::min), xs().reduce(f64::max)) else {
        return Err(PlotError::Empty("the chart has no point"));
    };
    if chart.log_x && x_min <= 0.0 {
        return Err(PlotError::Empty("a logarithmic axis needs positive x"));
    }
    let ys = || {
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
    };
    let y_max = ys().fold(chart.y_min, f64::max);
    let y_top = if y_max > chart.y_min {
        y_max + (y_max - chart.y_min) * 0.05
    } else {
        chart.y_min + 1.0
    };
    let y_low = ys().fold(f64::INFINITY, f64::min);
    if chart.log_y && y_low <= 0.0 {
        return Err(PlotError::Empty("a logarithmic axis needs positive y"));
    }
    register_font();
    let err = |e: String| PlotError::Draw {
        path: path.display().to_string(),
        message: e,
    };
    let root = BitMapBackend::new(path, chart.size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let log_y = || (y_low / 1.25..ys().fold(0.0, f64::max) * 1.25).log_scale();
    match (chart.log_x, chart.log_y) {
        (true, true) => draw(chart, &root, (x_min..x_max).log_scale().base(2.0), log_y()),
        (true, false) => draw(
            chart,
            &root,
            (x_min..x_max).log_scale().base(2.0),
            chart.y_min..y_top,
        ),
        (false, true) => draw(chart, &root, x_min..x_max, log_y()),
        (false, false) => draw(chart, &root, x_min..x_max, chart.y_min..y_top),
    }
    .map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))
}

fn draw<X, Y>(
    chart: &Chart,
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    x: X,
    y: Y,
) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    let log = chart.log_x;
    let x_fmt = move |v: &f64| {
        if log { size_label(*v) } else { format!("{v}") }
    };
    c.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&|v: &f64| {
            if *v >= 10.0 || *v == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        })
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in chart.series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let style = colour.stroke_width(2);
        c.draw_series(LineSeries::new(s.points.iter().copied(), style))
            .map_err(|e| e.to_string())?
            .label(&s.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        if chart.markers {
            c.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, colour.filled())))
                .map_err(|e| e.to_string())?;
        }
    }
    c.configure_series_labels()
        .label_font((FAMILY, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(match chart.legend {
            Legend::UpperLeft => SeriesLabelPosition::UpperLeft,
            Legend::LowerRight => SeriesLabelPosition::LowerRight,
        })
        .draw()
        .map_err(|e| e.to_string())
}

/// A byte count as the axis shows it: 64 B, 4 KiB, 1 MiB.
pub fn size_label(v: f64) -> String {
    const UNITS: [(f64, &str); 3] = [
        (1_073_741_824.0, "GiB"),
        (1_048_576.0, "MiB"),
        (1024.0, "KiB"),
    ];
    for (scale, unit) in UNITS {
        if v >= scale {
            let n = v / scale;
            return if n.fract().abs() < 1e-9 {
                format!("{n:.0} {unit}")
            } else {
                format!("{n:.1} {unit}")
            };
        }
    }
    format!("{v:.0} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chart becomes a PNG of the requested size; an empty one is refused.
    #[test]
    fn charts_become_png_files() {
        let dir = std::env::temp_dir().join(format!("softrnic-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("c.png");
        let chart = Chart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            log_y: false,
            markers: true,
            y_min: 0.0,
            legend: Legend::UpperLeft,
            size: (320, 200),
            series: vec![Series {
                name: "a".into(),
                points: vec![(64.0, 1.0), (4096.0, 3.0), (1048576.0, 2.0)],
            }],
        };
        draw_png(&chart, &file).expect("drawn");
        let png = std::fs::read(&file).expect("written");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big endian, at bytes 16..24.
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 320);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 200);
        let empty = Chart {
            series: Vec::new(),
            ..chart
        };
        assert!(matches!(draw_png(&empty, &file), Err(PlotError::Empty(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sizes_are_labelled_in_binary_units() {
        assert_eq!(size_label(64.0), "64 B");
        assert_eq!(size_label(4096.0), "4 KiB");
        assert_eq!(size_label(1536.0), "1.5 KiB");
        assert_eq!(size_label(4194304.0), "4 MiB");
    }
}
