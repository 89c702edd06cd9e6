//! Records the git commit of the source checkout at build time (`COSCHED_GIT_COMMIT`,
//! exposed as `coscheduling._core.__git_commit__`), so an installed package built from a
//! checkout (`pip install .`) still names its commit in every result's provenance.
//! Outside a git checkout (e.g. from a source archive) the commit is "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let commit = git(&here, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=COSCHED_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (a branch switch) and the branch's ref (a commit).
    if let Some(dir) = git(&here, &["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
    }
    if let (Some(common), Some(head_ref)) = (
        git(&here, &["rev-parse", "--git-common-dir"]),
        git(&here, &["symbolic-ref", "-q", "HEAD"]),
    ) {
        let common = here.join(common);
        println!(
            "cargo:rerun-if-changed={}",
            common.join(&head_ref).display()
        );
        println!(
            "cargo:rerun-if-changed={}",
            common.join("packed-refs").display()
        );
    }
    println!("cargo:rerun-if-changed=build.rs");
}
