//! What a sweep did and found, as the outputs (`outputs`, `html`, `table`) read it.

use super::analysis::{Analysis, Measurement};
use super::params::{Param, Point};

/// Everything a sweep did and found.
pub struct Sweep<'a> {
    pub command: &'a [String],
    pub params: &'a [Param],
    pub points: &'a [Point],
    pub measured: &'a [Measurement],
    pub analyses: &'a [Analysis],
    pub runs: usize,
    pub warmup: usize,
    pub grid: bool,
}

impl Sweep<'_> {
    /// The parameter a point varies, or `grid`.
    pub(super) fn swept(&self, point: &Point) -> &str {
        point.swept.map_or("grid", |i| &self.params[i].name)
    }

    pub fn failed(&self) -> impl Iterator<Item = &Measurement> {
        self.measured.iter().filter(|m| m.outcome.is_err())
    }
}
