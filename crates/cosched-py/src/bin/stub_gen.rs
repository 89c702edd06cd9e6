//! Generates `python/coscheduling/_core.pyi`, the type stub of `coscheduling._core`.
//!
//! Usage: `stub_gen [--check] [OUT]`. Without arguments the stub is written to
//! `python/coscheduling/_core.pyi` (relative to the repository root); with OUT it
//! is written there instead; with `--check` nothing is written and the exit code
//! is 1 when the file on disk differs from what would be generated.

use std::path::PathBuf;
use std::process::ExitCode;

const MODULE: &str = "coscheduling._core";

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stub_gen: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut check = false;
    let mut out: Option<PathBuf> = None;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!("usage: stub_gen [--check] [OUT]");
                return Ok(ExitCode::SUCCESS);
            }
            _ if out.is_none() && !a.starts_with('-') => out = Some(PathBuf::from(a)),
            _ => {
                return Err(
                    format!("unexpected argument {a:?}; usage: stub_gen [--check] [OUT]").into(),
                )
            }
        }
    }
    let info = _core::stub_info()?;
    let module = info
        .modules
        .get(MODULE)
        .ok_or_else(|| format!("no stub information for module {MODULE}"))?;
    let text = module.format_with_config(info.config.use_type_statement);
    let path = out.unwrap_or_else(|| info.python_root.join("coscheduling").join("_core.pyi"));
    if check {
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current != text {
            eprintln!(
                "{}: out of date with the Rust sources; regenerate it with `cargo run -p cosched-py --bin stub_gen`",
                path.display()
            );
            return Ok(ExitCode::from(1));
        }
        println!("{}: up to date", path.display());
    } else {
        std::fs::write(&path, text)?;
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
