//! Soft parsing shared by the presenters: a value either fits a display struct or gives `None`.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

/// Reads a JSON object into `T`, or `None` when it does not fit. Unknown keys are ignored: a
/// display struct needs only the fields it checks.
pub(crate) fn soft<T: DeserializeOwned>(value: &Value) -> Option<T> {
    // serde would also read a struct from an array of its fields; arguments and meta records
    // are objects.
    if !value.is_object() {
        return None;
    }
    dsh_tools::json::from_value(value).ok()
}

/// A string with something other than whitespace in it.
#[derive(Debug)]
pub(crate) struct NonBlank(pub(crate) String);

impl<'de> Deserialize<'de> for NonBlank {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<NonBlank, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.trim().is_empty() {
            return Err(D::Error::custom("blank string"));
        }
        Ok(NonBlank(text))
    }
}

/// Checks that a field is a JSON integer in any spelling (`30000`, `3e4`, `30000.0`); no card
/// shows its value, so none is kept.
#[derive(Debug)]
pub(crate) struct Integer;

impl<'de> Deserialize<'de> for Integer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Integer, D::Error> {
        let number = Number::deserialize(deserializer)?;
        if !dsh_tools::json::is_integer(&dsh_tools::json::JsonNumber::from(&number)) {
            return Err(D::Error::custom("not an integer"));
        }
        Ok(Integer)
    }
}
