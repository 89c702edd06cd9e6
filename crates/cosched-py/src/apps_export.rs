//! Bindings for the real-execution program: the text export of one application
//! preset's per-rank programs (`cosched apps export`) and the simulator's dedicated
//! run time of exactly that scaled program (to compare a real run against).

use crate::{json_text, value_error};
use cosched::model::apps;
use cosched::model::export::{scaled, to_export, CollectiveForm};
use cosched::model::node::NodePlatform;
use pyo3::prelude::*;
use pyo3_stub_gen::derive::gen_stub_pyfunction;

fn class_char(class: &str) -> PyResult<char> {
    let mut it = class.chars();
    match (it.next(), it.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(value_error(format!(
            "class: expected one letter (or '-' for parameterized apps), got {class:?}"
        ))),
    }
}

fn build(name: &str, class: &str, procs: u32) -> PyResult<cosched::model::program::Program> {
    apps::build(name, class_char(class)?, procs).map_err(|e| value_error(e.to_string()))
}

/// The per-rank programs of application preset `name` (class, procs) as the text
/// read by the real-execution program `cosched-ir-run` (docs/formats/program.md):
/// every amount (compute, I/O, message bytes, memory) multiplied by `scale`;
/// `collectives` is `library` (one line per collective, run by the MPI library) or
/// `p2p` (the IR's point-to-point rounds).
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (name, class_, procs, scale, collectives = "library"))]
pub fn apps_export(
    name: &str,
    class_: &str,
    procs: u32,
    scale: f64,
    collectives: &str,
) -> PyResult<String> {
    let form = CollectiveForm::parse(collectives).map_err(|e| value_error(e.to_string()))?;
    to_export(&build(name, class_, procs)?, scale, form).map_err(|e| value_error(e.to_string()))
}

/// Simulated dedicated run of preset `name` (class, procs) scaled by `scale` as
/// `apps_export` scales it, alone (MPL 1, one process per node) on `platform` (a
/// node-platform preset name or its JSON object) under node policy `policy`, with
/// compute divided by `speed` (CPU time asked per wall time obtained of the real
/// machine). Returns JSON text: time_ns, compute_ns (mean per rank), cpu_ns,
/// messages, bytes_sent.
#[gen_stub_pyfunction]
#[pyfunction]
#[pyo3(signature = (name, class_, procs, scale, platform, policy = "nls", speed = 1.0))]
#[allow(clippy::too_many_arguments)] // mirrors the Python keyword arguments
pub fn apps_dedicated(
    py: Python<'_>,
    name: &str,
    class_: &str,
    procs: u32,
    scale: f64,
    platform: &str,
    policy: &str,
    speed: f64,
) -> PyResult<String> {
    if !(scale.is_finite() && scale > 0.0) {
        return Err(value_error(format!(
            "scale must be a finite number > 0, got {scale}"
        )));
    }
    if !(speed.is_finite() && speed > 0.0) {
        return Err(value_error(format!(
            "speed must be a finite number > 0, got {speed}"
        )));
    }
    let plat = if platform.trim_start().starts_with('{') {
        let p: NodePlatform =
            serde_json::from_str(platform).map_err(|e| value_error(format!("platform: {e}")))?;
        p.validate()
            .map_err(|e| value_error(format!("platform: {e}")))?;
        p
    } else {
        NodePlatform::preset(platform).map_err(value_error)?
    };
    let program = scaled(&build(name, class_, procs)?, scale).at_speed(speed);
    let policy = policy.to_string();
    let run = py
        .detach(move || cosched::calibrate::dedicated_on(&plat, &policy, program))
        .map_err(|e| value_error(e.to_string()))?;
    json_text(&run)
}
