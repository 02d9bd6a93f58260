//! Calmness (jcarbon): each run records every CPU's frequency per cycle (`reader`, written as
//! `frequencies.csv` by the result sink, `trace`); `joular-ebpf calmness` compares two runs'
//! frequency distributions (`method`) and writes them as JSON and a chart (`html`).

mod html;
mod load;
mod method;
mod reader;
mod trace;

pub use html::{r_text, render as render_html, CALMNESS_HTML_FILE};
pub use load::{load_run, LoadError};
pub use method::{bins, calmness, pearson, Bins, Calmness, NoSamples, RunDistribution, MAX_BINS, METHOD};
pub use reader::FrequencyReader;
pub use trace::{
    cycle_rows, parse_frequencies, FrequencyCycle, FREQUENCIES_FILE, FREQUENCIES_HEADER, MAX_FREQUENCIES_BYTES,
};

/// The JSON file `calmness` writes.
pub const CALMNESS_JSON_FILE: &str = "calmness.json";

#[cfg(test)]
mod tests;
