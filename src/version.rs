//! Semantic versions read from input (`release-metadata`, an update service's graph), with
//! the reason a text is not one in plain words.
//!
//! The parsing is the `semver` crate's; only its wording is replaced where it names Rust
//! (`exceeds u64::MAX`). Every place whose semver error reaches a user goes through [`parse`],
//! so all of them say the same thing the same way.

use std::fmt;

/// The largest number a part of a version (major, minor, patch) may be.
pub const MAX_NUMBER: u64 = u64::MAX;

/// Why a text is not a semantic version, in plain words (see its `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionError {
    reason: String,
}

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for VersionError {}

/// Parses `text` as a semantic version (`MAJOR.MINOR.PATCH[-PRE][+BUILD]`).
///
/// # Errors
///
/// A [`VersionError`] saying what is wrong: empty, a number too large, an unexpected
/// character, a leading zero, …
pub fn parse(text: &str) -> Result<semver::Version, VersionError> {
    semver::Version::parse(text).map_err(|e| VersionError {
        reason: reason(text, &e),
    })
}

/// The reason `text` failed to parse with `err`, in plain words.
fn reason(text: &str, err: &semver::Error) -> String {
    if text.is_empty() {
        return "the version is empty".to_owned();
    }
    let said = err.to_string();
    // Only when that is the crate's complaint: `v1.<huge>.0` is wrong for its `v` first.
    if said.contains("u64::MAX")
        && let Some(part) = too_large(text)
    {
        return format!("the {part} version number is too large (at most {MAX_NUMBER})");
    }
    // The crate's other reasons are plain English ("unexpected character 'x' while parsing
    // minor version number"); any Rust spelling of a limit left in them is written out.
    said.replace("u64::MAX", &MAX_NUMBER.to_string())
        .replace("semver version", "semantic version")
}

/// The first of major, minor and patch that is all digits but does not fit in 64 bits.
fn too_large(text: &str) -> Option<&'static str> {
    let core = text.split(['-', '+']).next().unwrap_or(text);
    core.split('.')
        .zip(["major", "minor", "patch"])
        .find(|(number, _)| {
            !number.is_empty()
                && number.bytes().all(|b| b.is_ascii_digit())
                && number.parse::<u64>().is_err()
        })
        .map(|(_, part)| part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_mistake_first_is_said_first() {
        let e = parse(&format!("v1.{HUGE}.0")).unwrap_err().to_string();
        assert!(!e.contains("too large"), "{e}");
    }

    const HUGE: &str = "99999999999999999999999";

    #[test]
    fn numbers_past_64_bits_are_too_large_in_plain_words() {
        for (text, part) in [
            (format!("{HUGE}.0.0"), "major"),
            (format!("1.{HUGE}.0"), "minor"),
            (format!("1.0.{HUGE}"), "patch"),
            (format!("1.0.{HUGE}-rc.1+b"), "patch"),
        ] {
            let e = parse(&text).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("the {part} version number is too large (at most 18446744073709551615)"),
                "{text}"
            );
        }
        // The largest number is still a version.
        assert_eq!(parse("18446744073709551615.0.0").unwrap().major, u64::MAX);
    }

    #[test]
    fn other_reasons_name_no_rust() {
        for text in [
            "", "4.16", "4.16.x", "04.1.1", "1.2.3-", "1.2.3+", "v1.2.3", "1..2",
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(!e.is_empty(), "{text:?}");
            for rust in ["u64", "::", "semver version", "Error"] {
                assert!(!e.contains(rust), "{text:?}: {e}");
            }
        }
        assert_eq!(parse("").unwrap_err().to_string(), "the version is empty");
        assert_eq!(
            parse("4.16").unwrap_err().to_string(),
            "unexpected end of input while parsing minor version number"
        );
    }
}
