//! The distributed profile as a fleet of hosts in network namespaces
//! (`scripts/fleet`): a reduced drill, `kill_worker`, with two API hosts and
//! two worker hosts beside PostgreSQL, Redis and s3s-fs hosts. It needs root
//! and network namespaces; where the machine does not allow them the test
//! says why and passes without running (CI runs as root, so it runs there).

use std::process::Command;

use serde_json::Value;
use tests::binaries::binary;
use tests::services::workspace_root;

/// Why namespaces cannot be used here, if they cannot.
fn namespaces_unavailable(probe: &str) -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not root: ip netns needs root".to_owned());
    }
    let added = Command::new("ip").args(["netns", "add", probe]).output();
    match added {
        Err(err) => Some(format!("no ip command: {err}")),
        Ok(out) if !out.status.success() => Some(format!(
            "ip netns add refused: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => {
            let _ = Command::new("ip").args(["netns", "del", probe]).output();
            None
        }
    }
}

fn our_namespaces(name: &str) -> Vec<String> {
    let list = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|line| line.starts_with(&format!("{name}-")))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_fleet_finishes_a_killed_workers_uploads_and_leaves_no_namespace() {
    let name = format!("lat{}", std::process::id());
    if let Some(reason) = namespaces_unavailable(&format!("{name}-probe")) {
        eprintln!("skipped: the fleet drill needs network namespaces ({reason})");
        return;
    }
    let bin = binary("fleet-drill");
    let bin_dir = bin.parent().expect("target directory");
    // Built by the workspace build that made fleet-drill.
    binary("api");
    binary("workers");
    let dir = tempfile::tempdir().expect("fleet directory");
    let script = workspace_root().join("scripts/fleet");
    let run = tokio::task::spawn_blocking({
        let name = name.clone();
        let fleet_dir = dir.path().join("fleet");
        let bin_dir = bin_dir.to_path_buf();
        move || {
            Command::new(&script)
                .args(["drill", "--only", "kill_worker"])
                .env("FLEET_NAME", &name)
                .env("FLEET_DIR", &fleet_dir)
                .env("FLEET_BIN", &bin_dir)
                // Should this test die, the fleet goes down with it.
                .env("FLEET_OWNER_PID", std::process::id().to_string())
                .output()
                .expect("run scripts/fleet drill")
        }
    })
    .await
    .expect("drill thread");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let last = stdout.lines().last().unwrap_or_default();
    let verdict: Value = serde_json::from_str(last)
        .unwrap_or_else(|_| panic!("the last line is one JSON object:\n{stdout}\n{stderr}"));
    assert!(
        run.status.success(),
        "the drill failed: {verdict}\n{stderr}"
    );
    assert_eq!(verdict["hosts"], 8, "{verdict}");
    let drill = &verdict["drills"]["kill_worker"];
    assert_eq!(drill["ok"], true, "{verdict}\n{stderr}");
    assert!(
        drill["jobs_held_at_kill"].as_u64().unwrap_or(0) > 0,
        "{drill}"
    );
    assert!(
        verdict["uploads_acked"].as_u64().unwrap_or(0) > 0,
        "{verdict}"
    );
    assert_eq!(verdict["uploads_unfinished"], 0, "{verdict}");
    assert_eq!(verdict["listings_lost"], 0, "{verdict}");
    assert_eq!(verdict["events_undelivered"], 0, "{verdict}");
    assert_eq!(
        our_namespaces(&name),
        Vec::<String>::new(),
        "the drill took its fleet down"
    );
}
