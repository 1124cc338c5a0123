//! Points the doctests at the cookbook pages: `docs/cookbook` of this workspace, or the
//! directory in `DSH_COOKBOOK_DIR` (the drift check compiles a mutated copy that way).

fn main() {
    println!("cargo:rerun-if-env-changed=DSH_COOKBOOK_DIR");
    let dir = match std::env::var("DSH_COOKBOOK_DIR") {
        Ok(dir) if !dir.is_empty() => dir,
        _ => format!("{}/../../docs/cookbook", env!("CARGO_MANIFEST_DIR")),
    };
    println!("cargo:rerun-if-changed={dir}");
    println!("cargo:rustc-env=DSH_COOKBOOK_DIR={dir}");
}
