//! What a benchmark reports, how its samples are taken, and how results are printed.

use anyhow::Result;
use serde_json::{Map, Value, json};
use std::fmt;

/// How many rounds a benchmark runs: `warmup` unrecorded rounds, then `samples` recorded ones.
/// Each round measures the value and the baseline once, alternating which goes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounds {
    /// Rounds run and thrown away (caches, page cache, allocator, lazy statics).
    pub warmup: usize,
    /// Rounds whose samples are kept; the reported figures are their medians.
    pub samples: usize,
}

/// What a benchmark must achieve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// The value itself (in its unit) must be at most this.
    ValueAtMost(f64),
    /// `value / baseline` must be at most this (times: lower is better).
    RatioAtMost(f64),
    /// `value / baseline` must be at least this (throughputs: higher is better).
    RatioAtLeast(f64),
    /// No target: the figures are reported only.
    Report,
}

/// A secondary figure of a benchmark (peak memory, byte accounting), with an optional upper
/// limit that is part of the benchmark's target.
#[derive(Clone, Debug, PartialEq)]
pub struct Extra {
    /// The JSON field name.
    pub key: &'static str,
    /// The figure.
    pub value: f64,
    /// Its unit, for the human line.
    pub unit: &'static str,
    /// The figure must be at most this for the target to be met.
    pub at_most: Option<f64>,
}

/// One benchmark's result: its value and its baseline, measured side by side in one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    /// The benchmark's name, as `docs/performance.md` lists it.
    pub name: &'static str,
    /// The median value.
    pub value: f64,
    /// The unit of `value` and `baseline_value`.
    pub unit: &'static str,
    /// What the baseline is.
    pub baseline: &'static str,
    /// The median baseline value.
    pub baseline_value: f64,
    /// Whether a higher value is better (throughputs) or a lower one (times).
    pub higher_is_better: bool,
    /// What the benchmark must achieve.
    pub target: Target,
    /// Secondary figures.
    pub extras: Vec<Extra>,
    /// How many samples each median was taken over.
    pub samples: usize,
}

impl Measurement {
    /// `value / baseline_value`.
    pub fn ratio(&self) -> f64 {
        self.value / self.baseline_value
    }

    /// Whether the target (including every extra's limit) is met; `None` for report-only
    /// benchmarks.
    pub fn met(&self) -> Option<bool> {
        let main = match self.target {
            Target::ValueAtMost(limit) => self.value <= limit,
            Target::RatioAtMost(limit) => self.ratio() <= limit,
            Target::RatioAtLeast(limit) => self.ratio() >= limit,
            Target::Report => return None,
        };
        let extras = self
            .extras
            .iter()
            .all(|e| e.at_most.is_none_or(|limit| e.value <= limit));
        Some(main && extras)
    }

    /// The target as text.
    pub fn target_text(&self) -> String {
        let mut text = match self.target {
            Target::ValueAtMost(limit) => format!("≤ {} {}", number(limit), self.unit),
            Target::RatioAtMost(limit) => format!("ratio ≤ {limit:.2}"),
            Target::RatioAtLeast(limit) => format!("ratio ≥ {limit:.2}"),
            Target::Report => String::from("report only"),
        };
        for extra in &self.extras {
            if let Some(limit) = extra.at_most {
                text.push_str(&format!(
                    ", {} ≤ {} {}",
                    extra.key,
                    number(limit),
                    extra.unit
                ));
            }
        }
        text
    }

    /// The JSON object of the `--json` line: the six fields that
    /// docs/performance.md#running-the-benchmarks names first, then the target, whether it is
    /// met, the sample count and the extras.
    pub fn to_json(&self) -> Value {
        let mut object = Map::new();
        object.insert("name".into(), json!(self.name));
        object.insert("value".into(), finite(self.value));
        object.insert("unit".into(), json!(self.unit));
        object.insert("baseline".into(), json!(self.baseline));
        object.insert("baseline_value".into(), finite(self.baseline_value));
        object.insert("ratio".into(), finite(self.ratio()));
        object.insert("higher_is_better".into(), json!(self.higher_is_better));
        object.insert("target".into(), json!(self.target_text()));
        object.insert("met".into(), json!(self.met()));
        object.insert("samples".into(), json!(self.samples));
        for extra in &self.extras {
            object.insert(extra.key.into(), finite(extra.value));
        }
        Value::Object(object)
    }
}

impl fmt::Display for Measurement {
    /// The human line: name, value, baseline, ratio (and which direction is better), extras,
    /// target and verdict.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let direction = if self.higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        };
        write!(
            f,
            "{:<18} {:>12} {:<8} | baseline ({}) {} {} | ratio {:.3} ({direction})",
            self.name,
            number(self.value),
            self.unit,
            self.baseline,
            number(self.baseline_value),
            self.unit,
            self.ratio(),
        )?;
        for extra in &self.extras {
            write!(f, " | {} {} {}", extra.key, number(extra.value), extra.unit)?;
        }
        let verdict = match self.met() {
            Some(true) => "met",
            Some(false) => "NOT MET",
            None => "reported",
        };
        write!(f, " | target {}: {verdict}", self.target_text())
    }
}

/// A figure with a precision that suits its size.
pub(crate) fn number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1000.0 || (value.fract() == 0.0 && magnitude < 1e15) {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 0.1 {
        format!("{value:.3}")
    } else {
        format!("{value:.5}")
    }
}

fn finite(value: f64) -> Value {
    if value.is_finite() {
        json!(value)
    } else {
        Value::Null
    }
}

/// The `--json` line: a JSON array of every measurement.
pub fn json_line(measurements: &[Measurement]) -> String {
    Value::Array(measurements.iter().map(Measurement::to_json).collect()).to_string()
}

/// The median of the samples (the mean of the middle two for an even count).
pub(crate) fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => samples[n / 2],
        _ => (samples[n / 2 - 1] + samples[n / 2]) / 2.0,
    }
}

/// Runs `value` and `baseline` alternately, flipping which goes first every round so both
/// share the machine's noise, and returns the medians `(value, baseline)`.
pub(crate) fn interleaved(
    rounds: Rounds,
    mut value: impl FnMut() -> Result<f64>,
    mut baseline: impl FnMut() -> Result<f64>,
) -> Result<(f64, f64)> {
    for _ in 0..rounds.warmup {
        value()?;
        baseline()?;
    }
    let mut values = Vec::with_capacity(rounds.samples);
    let mut baselines = Vec::with_capacity(rounds.samples);
    for round in 0..rounds.samples {
        if round % 2 == 0 {
            values.push(value()?);
            baselines.push(baseline()?);
        } else {
            baselines.push(baseline()?);
            values.push(value()?);
        }
    }
    Ok((median(values), median(baselines)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn interleaving_alternates_the_order() {
        let order = std::cell::RefCell::new(Vec::new());
        let rounds = Rounds {
            warmup: 1,
            samples: 3,
        };
        let (v, b) = interleaved(
            rounds,
            || {
                order.borrow_mut().push('v');
                Ok(1.0)
            },
            || {
                order.borrow_mut().push('b');
                Ok(2.0)
            },
        )
        .unwrap();
        assert_eq!((v, b), (1.0, 2.0));
        assert_eq!(
            order.into_inner(),
            vec!['v', 'b', 'v', 'b', 'b', 'v', 'v', 'b']
        );
    }

    #[test]
    fn targets_include_the_extras_limits() {
        let mut m = Measurement {
            name: "bash_throughput",
            value: 80.0,
            unit: "MB/s",
            baseline: "shell redirect",
            baseline_value: 100.0,
            higher_is_better: true,
            target: Target::RatioAtLeast(0.75),
            extras: vec![Extra {
                key: "peak_rss_growth_mib",
                value: 10.0,
                unit: "MiB",
                at_most: Some(32.0),
            }],
            samples: 1,
        };
        assert_eq!(m.met(), Some(true));
        m.extras[0].value = 40.0;
        assert_eq!(m.met(), Some(false));
        let json = m.to_json();
        assert_eq!(json["ratio"], json!(0.8));
        assert_eq!(json["met"], json!(false));
        assert_eq!(json["peak_rss_growth_mib"], json!(40.0));
    }
}
