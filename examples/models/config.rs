//! Reading a model's config from JSON (`meta.json`'s `config`, a `config.json`) by type: each
//! getter takes the key and, where the library has one, its default. A missing key, or one set
//! to `null`, takes the default; a value of another type is an error naming the config and the
//! key (a wrong type is never read as the default).

use serde_json::Value as Json;
use torchfn::prelude::*;

/// A JSON object of config keys, read by type; errors name `name` (`LlamaConfig`) and the key.
#[derive(Clone, Copy)]
pub struct Config<'a> {
    name: &'static str,
    /// The key of the object this one is nested in (`rope_scaling`), if any.
    within: Option<&'a str>,
    json: &'a serde_json::Map<String, Json>,
}

impl<'a> Config<'a> {
    /// The reader of `json`, which must be an object.
    pub fn new(name: &'static str, json: &'a Json) -> Result<Config<'a>> {
        let json =
            json.as_object().ok_or_else(|| Error::value_error(format!("{name}: the config must be a JSON object")))?;
        Ok(Config { name, within: None, json })
    }

    /// An error naming the config and `key`: `{name}: {key} {message}` (`{name}:
    /// {within}.{key} ...` in a nested object).
    pub fn error(&self, key: &str, message: impl std::fmt::Display) -> Error {
        match self.within {
            Some(within) => Error::value_error(format!("{}: {within}.{key} {message}", self.name)),
            None => Error::value_error(format!("{}: {key} {message}", self.name)),
        }
    }

    /// Whether the object has no keys.
    pub fn is_empty(&self) -> bool {
        self.json.is_empty()
    }

    /// Whether the config has `key`, even as `null`.
    pub fn contains(&self, key: &str) -> bool {
        self.json.contains_key(key)
    }

    /// `key`'s value converted by `convert`; `None` when the key is missing or `null`, an error
    /// saying it must be `what` when `convert` refuses it.
    fn read<T>(&self, key: &str, what: &str, convert: impl Fn(&'a Json) -> Option<T>) -> Result<Option<T>> {
        match self.json.get(key).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => convert(v).map(Some).ok_or_else(|| self.error(key, format!("must be {what}, got {v}"))),
        }
    }

    /// A whole number, if set.
    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.read(key, "a whole number", whole)
    }

    /// A whole number that must be set.
    pub fn usize(&self, key: &str) -> Result<usize> {
        self.opt_usize(key)?.ok_or_else(|| self.error(key, "is missing (a whole number)"))
    }

    /// A whole number, `default` when not set.
    pub fn usize_or(&self, key: &str, default: usize) -> Result<usize> {
        Ok(self.opt_usize(key)?.unwrap_or(default))
    }

    /// A number, if set.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        self.read(key, "a number", Json::as_f64)
    }

    /// A number that must be set.
    pub fn f64(&self, key: &str) -> Result<f64> {
        self.opt_f64(key)?.ok_or_else(|| self.error(key, "is missing (a number)"))
    }

    /// A number, `default` when not set.
    pub fn f64_or(&self, key: &str, default: f64) -> Result<f64> {
        Ok(self.opt_f64(key)?.unwrap_or(default))
    }

    /// `true` or `false`, `default` when not set.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        Ok(self.read(key, "true or false", Json::as_bool)?.unwrap_or(default))
    }

    /// A string, if set.
    pub fn opt_string(&self, key: &str) -> Result<Option<String>> {
        self.read(key, "a string", |v| v.as_str().map(String::from))
    }

    /// A string, `default` when not set.
    pub fn string_or(&self, key: &str, default: &str) -> Result<String> {
        Ok(self.opt_string(key)?.unwrap_or_else(|| default.to_string()))
    }

    /// A list of whole numbers, `default` when not set.
    pub fn usizes_or(&self, key: &str, default: &[usize]) -> Result<Vec<usize>> {
        let list = |v: &Json| v.as_array()?.iter().map(whole).collect::<Option<Vec<_>>>();
        Ok(self.read(key, "a list of whole numbers", list)?.unwrap_or_else(|| default.to_vec()))
    }

    /// A list of strings, `default` when not set.
    pub fn strings_or(&self, key: &str, default: &[String]) -> Result<Vec<String>> {
        let list = |v: &Json| v.as_array()?.iter().map(|s| s.as_str().map(String::from)).collect::<Option<Vec<_>>>();
        Ok(self.read(key, "a list of strings", list)?.unwrap_or_else(|| default.to_vec()))
    }

    /// A height and width given as one number or `[h, w]`, if set.
    pub fn opt_size(&self, key: &str) -> Result<Option<[usize; 2]>> {
        let size = |v: &Json| match v.as_array() {
            Some(hw) if hw.len() == 2 => Some([whole(&hw[0])?, whole(&hw[1])?]),
            Some(_) => None,
            None => whole(v).map(|n| [n; 2]),
        };
        self.read(key, "a whole number or [h, w]", size)
    }

    /// A height and width given as one number or `[h, w]`, `default` when not set.
    pub fn size_or(&self, key: &str, default: [usize; 2]) -> Result<[usize; 2]> {
        Ok(self.opt_size(key)?.unwrap_or(default))
    }

    /// A nested object (`rope_scaling`), if set, whose errors name it.
    pub fn object(&self, key: &str) -> Result<Option<Config<'a>>> {
        let within = self.json.get_key_value(key).map(|(k, _)| k.as_str());
        self.read(key, "an object", |v| v.as_object().map(|json| Config { name: self.name, within, json }))
    }
}

/// A JSON number that is a whole number ≥ 0.
fn whole(v: &Json) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}
