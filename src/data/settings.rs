//! The data folder's settings file, `gen.json`: read as a JSON object of settings, with a
//! clear problem when it is empty or another kind of value (its values are checked in
//! [`super::validate`]).

use crate::config::{self, CONFIG_FILE, DataSettings};
use crate::json::{parse_json, read_data_file};
use crate::problem::Problem;
use serde_json::Value;
use std::path::Path;

/// Reads `gen.json`: a JSON object of settings (an empty file or another kind of value is
/// reported as such, not as a bad record).
pub(crate) fn read_settings(path: &Path) -> Result<(DataSettings, blake3::Hash), Vec<Problem>> {
    let bytes = read_data_file(path).map_err(|p| vec![p])?;
    let hash = blake3::hash(&bytes);
    let example = "e.g. {\"base_url\": \"https://api.example.org\"}, or {} for the defaults";
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(vec![Problem::whole(
            path,
            format!("empty file: {CONFIG_FILE} holds the settings as a JSON object, {example}"),
        )]);
    }
    let value = parse_json(path, &bytes).map_err(|p| vec![p])?;
    if !value.is_object() {
        let kind = match value {
            Value::Array(_) => "an array",
            Value::String(_) => "a string",
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return Err(vec![Problem::whole(
            path,
            format!("the settings are {kind}, not a JSON object: write them as an object, {example}"),
        )]);
    }
    let config = config::parse(value)
        .map_err(|wrong| wrong.into_iter().map(|(at, message)| Problem::new(path, at, message)).collect::<Vec<_>>())?;
    Ok((config, hash))
}
