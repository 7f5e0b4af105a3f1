//! The example configuration files shipped in deploy/config/ stay valid as keys change:
//! each one resolves for its role (`--print-config` checks a file without starting).

mod common;

use std::process::{Command, Stdio};

#[test]
fn deploy_config_examples_resolve() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/config");
    for (role, file) in [
        ("mnode", "mnode.toml"),
        ("dnode", "dnode-1.toml"),
        ("local", "local.toml"),
    ] {
        let path = format!("{dir}/{file}");
        let mut cmd = Command::new(common::BIN);
        for (k, _) in std::env::vars() {
            if k.starts_with("TIDAL_") {
                cmd.env_remove(k);
            }
        }
        let out = cmd
            .args([role, "--config", &path, "--print-config"])
            .stdin(Stdio::null())
            .output()
            .expect("run tidal");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("data = "), "{path}:\n{stdout}");
        assert!(
            stdout.contains(&format!("# {path}")),
            "values come from the file:\n{stdout}"
        );
    }
}
