//! Cost-weight files (stowage.dev/weights/v1; the format is `stowage_core::weights`).

use std::path::Path;

use stowage_core::weights::{Weights, WeightsError};

/// Reads and parses a weights file; errors name the file and the field.
pub fn load(path: &Path) -> Result<Weights, WeightsError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| WeightsError { file: file.clone(), message: format!("cannot read: {e}") })?;
    Weights::parse(&file, &text)
}
