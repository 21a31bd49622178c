//! Figures as the benchmarks report them: medians, rounding to a number of
//! places, KiB as MiB.

/// The median of `values`; NaN when there are none.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// `value` rounded to `places` decimal places.
pub(crate) fn round(value: f64, places: i32) -> f64 {
    let factor = 10f64.powi(places);
    (value * factor).round() / factor
}

/// KiB as MiB, to one decimal place.
pub(crate) fn mib(kb: u64) -> f64 {
    round(kb as f64 / 1024.0, 1)
}
