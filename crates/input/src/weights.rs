//! Cost-weight files (stowage.dev/weights/v1; the format is `stowage_core::weights`).

use std::path::Path;

use stowage_core::weights::{Weights, WeightsError};

/// Reads and parses a weights file; errors name the file and the field.
pub fn load(path: &Path) -> Result<Weights, WeightsError> {
    let file = path.display().to_string();
    let text = crate::read::read_text(path).map_err(|e| WeightsError { file: file.clone(), message: e.message })?;
    Weights::parse(&file, &text)
}
