//! What criterion measured, read back from the files it wrote, for the benchmarks that print
//! ratios between their functions.

use std::path::Path;
use std::time::SystemTime;

/// The mean point estimate, in nanoseconds, of benchmark `function` of `group` that ran since
/// `since`, as criterion wrote it under `output`.
pub fn mean_ns(output: &Path, group: &str, function: &str, since: SystemTime) -> Option<f64> {
    let path = output
        .join(group)
        .join(function)
        .join("new")
        .join("estimates.json");
    let fresh = std::fs::metadata(&path)
        .and_then(|metadata| metadata.modified())
        .is_ok_and(|modified| modified >= since);
    if !fresh {
        return None;
    }
    let estimates: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()?;
    estimates["mean"]["point_estimate"].as_f64()
}
