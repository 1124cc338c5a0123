//! The error of a missing file: the nearest directory that exists, and names like the one
//! asked for.

use std::path::Path;

/// How many similar names the error lists.
const SIMILAR: usize = 5;

/// "not found" for `path`, with the nearest existing parent and similar names in it.
pub(crate) fn not_found(path: &Path) -> String {
    let mut text = format!("{} does not exist.", path.display());
    let mut missing = path;
    let parent = loop {
        match missing.parent() {
            Some(parent) if parent.is_dir() => break Some(parent),
            Some(parent) => missing = parent,
            None => break None,
        }
    };
    let (Some(parent), Some(wanted)) = (parent, missing.file_name()) else {
        return text;
    };
    text.push_str(&format!(
        " The nearest existing directory is {}",
        parent.display()
    ));
    let wanted = wanted.to_string_lossy();
    let names = similar_names(parent, &wanted);
    if names.is_empty() {
        text.push_str(&format!(
            "; it has nothing named like `{wanted}`. Find the file with `glob`."
        ));
    } else {
        text.push_str(&format!(
            "; similar names there: {}. Check the path, or find the file with `glob`.",
            names.join(", ")
        ));
    }
    text
}

fn similar_names(dir: &Path, wanted: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let lower = wanted.to_lowercase();
    let mut scored: Vec<(f64, String)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let candidate = name.to_lowercase();
            let stem = |s: &str| s.split('.').next().unwrap_or_default().to_owned();
            let score =
                strsim::jaro_winkler(&lower, &candidate).max(if stem(&lower) == stem(&candidate) {
                    0.95
                } else {
                    0.0
                });
            (score >= 0.8).then_some((score, name))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    scored.into_iter().take(SIMILAR).map(|(_, n)| n).collect()
}
