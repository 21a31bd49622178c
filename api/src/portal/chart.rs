//! Server-rendered SVG charts: the portal draws them from numbers in the
//! template (`portal/usage.html`), without a chart library.

/// One bar segment of a stacked column chart, in SVG user units.
pub(crate) struct Segment {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
    pub class: &'static str,
    pub title: String,
}

/// A label under the x axis.
pub(crate) struct Tick {
    pub x: u32,
    pub label: String,
}

/// A stacked column chart: one column per slot, stacked by series.
pub(crate) struct Columns {
    pub width: u32,
    pub height: u32,
    pub segments: Vec<Segment>,
    pub ticks: Vec<Tick>,
    pub max: u64,
}

/// Height of the plot area; the rest is for the ticks.
const PLOT: u32 = 160;

impl Columns {
    /// Draws `slots` (label, values per series) with series classes
    /// `classes` (CSS classes fill them).
    pub fn new(slots: &[(String, Vec<u64>)], classes: &[&'static str], names: &[&str]) -> Self {
        Self::labelled_every(slots, classes, names, 3)
    }

    /// The same, with a label under every `every`-th column only (many
    /// narrow columns: a day by the minute).
    pub fn labelled_every(
        slots: &[(String, Vec<u64>)],
        classes: &[&'static str],
        names: &[&str],
        every: usize,
    ) -> Self {
        let column = 24;
        let gap = 6;
        let width = u32::try_from(slots.len()).unwrap_or(0) * (column + gap) + gap;
        let max = slots
            .iter()
            .map(|(_, values)| values.iter().sum::<u64>())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut segments = Vec::new();
        let mut ticks = Vec::new();
        for (index, (label, values)) in slots.iter().enumerate() {
            let x = gap + u32::try_from(index).unwrap_or(0) * (column + gap);
            let mut top = PLOT;
            for (series, value) in values.iter().enumerate() {
                if *value == 0 {
                    continue;
                }
                let height = u32::try_from((*value * u64::from(PLOT)).div_ceil(max))
                    .unwrap_or(PLOT)
                    .clamp(1, top);
                top -= height;
                segments.push(Segment {
                    x,
                    y: top,
                    width: column,
                    height,
                    class: classes.get(series).copied().unwrap_or("s0"),
                    title: format!(
                        "{label}: {value} {}",
                        names.get(series).copied().unwrap_or_default()
                    ),
                });
            }
            if index % every.max(1) == 0 {
                ticks.push(Tick {
                    x: x + column / 2,
                    label: label.clone(),
                });
            }
        }
        Self {
            width,
            height: PLOT + 20,
            segments,
            ticks,
            max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tallest_column_fills_the_plot_and_the_others_scale() {
        let chart = Columns::new(
            &[("00".into(), vec![10, 0, 0]), ("01".into(), vec![3, 2, 0])],
            &["ok", "client", "server"],
            &["2xx", "4xx", "5xx"],
        );
        assert_eq!(chart.max, 10);
        assert_eq!(chart.segments[0].height, PLOT);
        assert_eq!(chart.segments[0].y, 0);
        assert_eq!(chart.segments[1].height, 48);
        assert_eq!(chart.segments[2].height, 32);
        assert_eq!(chart.segments[2].y, PLOT - 48 - 32);
    }
}
