//! The Rust mirror of `real/include/cosched_proto.h` has the header's layout:
//! a C program generated from the mirror's field list prints sizes and offsets
//! as gcc lays the header out, and they must equal the mirror's; and the shim's
//! own `cosched-proto-layout` (real/tools/proto_layout.c, built here with gcc)
//! must print the mirror's sizes and offsets.

use cosched_real::proto::{layout, layout_text};
use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn mirror_matches_gcc_layout_of_the_header() {
    let dir = std::env::temp_dir().join(format!("cosched-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"cosched_proto.h\"\nint main(void){\n",
    );
    let mut cur = "";
    for (name, _, _) in layout() {
        if name.starts_with("cosched_") {
            cur = name;
            c += &format!("printf(\"{name} %zu\\n\", sizeof(struct {name}));\n");
        } else {
            c += &format!(
                "printf(\"{cur}.{name} %zu %zu\\n\", offsetof(struct {cur}, {name}), sizeof(((struct {cur}*)0)->{name}));\n"
            );
        }
    }
    c += "return 0;}\n";
    std::fs::write(dir.join("l.c"), c).unwrap();
    let out = Command::new("gcc")
        .arg("-I")
        .arg(repo().join("real/include"))
        .arg("-o")
        .arg(dir.join("l"))
        .arg(dir.join("l.c"))
        .output()
        .expect("gcc is needed for the protocol layout test");
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(dir.join("l")).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(String::from_utf8(run.stdout).unwrap(), layout_text());
}

#[test]
fn mirror_matches_the_shims_proto_layout_tool() {
    let dir = std::env::temp_dir().join(format!("cosched-layout-tool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("gcc")
        .arg("-I")
        .arg(repo().join("real/include"))
        .arg("-o")
        .arg(dir.join("cosched-proto-layout"))
        .arg(repo().join("real/tools/proto_layout.c"))
        .output()
        .expect("gcc is needed for the protocol layout test");
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(dir.join("cosched-proto-layout"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(v["version"], cosched_real::proto::PROTO_VERSION);
    assert_eq!(v["shm_magic"], cosched_real::proto::SHM_MAGIC);
    let mut cur = "";
    let mut fields = 0;
    for (name, off, size) in layout() {
        if name.starts_with("cosched_") {
            cur = name;
            assert_eq!(v[cur]["size"], size, "size of {cur}");
            assert_eq!(
                v[cur]["offsets"].as_object().unwrap().len() + 1,
                layout()
                    .iter()
                    .skip_while(|f| f.0 != cur)
                    .skip(1)
                    .take_while(|f| !f.0.starts_with("cosched_"))
                    .count()
                    + 1,
                "fields of {cur}"
            );
        } else {
            assert_eq!(v[cur]["offsets"][name], off, "offset of {cur}.{name}");
            fields += 1;
        }
    }
    assert_eq!(fields, 48);
}

#[test]
fn message_types_and_event_mask_bits_match_the_header() {
    let dir = std::env::temp_dir().join(format!("cosched-msgtypes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from("#include <stdio.h>\n#include \"cosched_proto.h\"\nint main(void){\n");
    let mut want = String::new();
    for (name, v) in cosched_real::proto::msg::ALL {
        c += &format!("printf(\"{name} %d\\n\", (int)COSCHED_MSG_{name});\n");
        want += &format!("{name} {v}\n");
    }
    for (name, v) in cosched_real::proto::skip::ALL {
        c += &format!("printf(\"SKIP_{name} %u\\n\", COSCHED_SKIP_{name});\n");
        want += &format!("SKIP_{name} {v}\n");
    }
    c += "printf(\"ON_CPU_FRESH_NS %llu\\n\", COSCHED_ON_CPU_FRESH_NS);\n";
    want += &format!("ON_CPU_FRESH_NS {}\n", cosched_real::proto::ON_CPU_FRESH_NS);
    c += "return 0;}\n";
    std::fs::write(dir.join("t.c"), c).unwrap();
    let out = Command::new("gcc")
        .arg("-I")
        .arg(repo().join("real/include"))
        .arg("-o")
        .arg(dir.join("t"))
        .arg(dir.join("t.c"))
        .output()
        .expect("gcc is needed for the protocol layout test");
    assert!(
        out.status.success(),
        "gcc failed (a type missing from the header?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(dir.join("t")).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(String::from_utf8(run.stdout).unwrap(), want);
}
