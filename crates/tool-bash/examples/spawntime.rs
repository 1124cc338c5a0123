#![allow(clippy::unwrap_used, clippy::print_stdout, missing_docs)]
use std::time::Instant;
use tool_bash::shell::{ShellExecutor, ShellRequest};
fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ex = tool_bash::LocalExecutor::default();
        let n: usize = std::env::var("N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200);
        for round in 0..3 {
            let t = Instant::now();
            for _ in 0..n {
                let spec = ex.resolve(ShellRequest::new("true"), None).unwrap();
                ex.run(spec).await.unwrap();
            }
            let a = t.elapsed().as_secs_f64() * 1e3 / n as f64;
            let t = Instant::now();
            for _ in 0..n {
                tokio::process::Command::new("/bin/bash")
                    .arg("-c")
                    .arg("true")
                    .stdin(std::process::Stdio::null())
                    .output()
                    .await
                    .unwrap();
            }
            let b = t.elapsed().as_secs_f64() * 1e3 / n as f64;
            println!(
                "round {round}: executor {a:.3} ms, raw {b:.3} ms, ratio {:.2}",
                a / b
            );
        }
    });
}
