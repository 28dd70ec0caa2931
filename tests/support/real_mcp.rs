//! MCP servers that no one here wrote, installed from the package registries the first time
//! a test asks for them and kept under `target/mcp-servers/` for later runs:
//! `@modelcontextprotocol/server-everything` and `server-filesystem` from npm,
//! `mcp-server-time` and `mcp-server-git` from the Python registry (in a virtual
//! environment). Tests in several processes may ask at once: a lock file lets one install.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the real servers' programs are.
pub struct RealServers {
    pub everything: PathBuf,
    pub filesystem: PathBuf,
    pub time: PathBuf,
    pub git: PathBuf,
}

/// Pinned, so a release that renames a tool does not change what the tests see.
const NPM_PACKAGES: [&str; 2] = [
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
];
const PYTHON_PACKAGES: [&str; 2] = ["mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19"];

/// The servers, installed first if they are not yet. Panics with what failed: these tests
/// need node, npm and python3 with venv, which `.ci/run` installs.
pub fn real_servers() -> RealServers {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/mcp-servers");
    std::fs::create_dir_all(&root).expect("target/mcp-servers");
    let servers = RealServers {
        everything: root.join("npm/node_modules/.bin/mcp-server-everything"),
        filesystem: root.join("npm/node_modules/.bin/mcp-server-filesystem"),
        time: root.join("venv/bin/mcp-server-time"),
        git: root.join("venv/bin/mcp-server-git"),
    };
    let installed = |s: &RealServers| {
        [&s.everything, &s.filesystem, &s.time, &s.git]
            .iter()
            .all(|p| p.exists())
    };
    if installed(&servers) {
        return servers;
    }
    let lock = std::fs::File::create(root.join("install.lock")).expect("the install lock");
    lock.lock().expect("taking the install lock");
    if !installed(&servers) {
        install(&root);
    }
    assert!(
        installed(&servers),
        "the MCP servers were not all installed under {}",
        root.display()
    );
    servers
}

fn install(root: &Path) {
    let npm = root.join("npm");
    std::fs::create_dir_all(&npm).expect("the npm folder");
    run(Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
        .arg(&npm)
        .args(NPM_PACKAGES));
    let venv = root.join("venv");
    if !venv.join("bin/pip").exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    }
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(PYTHON_PACKAGES));
}

fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("could not run {command:?}: {err}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
