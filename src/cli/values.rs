//! Parsers for flag values that must be refused early (exit code 2) rather than reach the
//! engine or a manifest: `--parallelism`, `--release-image` and `--accept-risks`.

use std::sync::LazyLock;

/// The most graph nodes a run may apply at once: well above what helps (the API server
/// admits a few hundred requests in flight by default) and far below what exhausts memory,
/// file descriptors or the server.
pub const MAX_PARALLELISM: usize = 256;

/// `--parallelism N`: a whole number from 1 to [`MAX_PARALLELISM`].
pub fn parse_parallelism(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_PARALLELISM).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {MAX_PARALLELISM} (nodes of the task graph applied at once)"
        )),
    }
}

/// An image reference as container tools accept it (the grammar of
/// github.com/distribution/reference): `[host[:port]/]path[:tag][@algorithm:hex]`.
static IMAGE_REFERENCE: LazyLock<regex::Regex> = LazyLock::new(|| {
    let domain_component = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let domain =
        format!(r"(?:{domain_component}(?:\.{domain_component})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?");
    let path_component = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
    let tag = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}";
    let digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
    regex::Regex::new(&format!(
        r"\A(?:{domain}/)?{path_component}(?:/{path_component})*(?::{tag})?(?:@{digest})?\z"
    ))
    .expect("image reference regex")
});

/// `--release-image PULLSPEC`: an image reference such as
/// `quay.io/openshift-release-dev/ocp-release@sha256:…`, nothing else (it is rendered into
/// manifests, so a newline or a quote must never get there).
pub fn parse_release_image(s: &str) -> Result<String, String> {
    let name_len = s.find(['@', ':']).unwrap_or(s.len());
    if IMAGE_REFERENCE.is_match(s) && name_len <= 255 {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{s:?} is not an image reference: write registry/repository[:tag][@sha256:digest], lower-case, such as quay.io/openshift-release-dev/ocp-release@sha256:…"
        ))
    }
}

/// One name of `--accept-risks`: what `spec.desiredUpdate.acceptRisks[].name` accepts (1 to
/// 256 characters), without spaces. A name that is no preflight risk of cvo is accepted too:
/// acceptRisks also names the risks of an update service.
pub fn parse_risk_name(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s.len() > 256 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "a risk name is 1 to 256 characters without spaces, such as MinorUpdateWhileDeletionInProgress (docs/preflight.md)"
                .to_owned(),
        );
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallelism_bounds() {
        assert_eq!(parse_parallelism("1"), Ok(1));
        assert_eq!(parse_parallelism("256"), Ok(256));
        for bad in [
            "0",
            "257",
            "1000000",
            "-1",
            "",
            "x",
            "99999999999999999999999",
        ] {
            assert!(parse_parallelism(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn image_references() {
        for ok in [
            "r",
            "quay.io/r:4.16.2-x86_64",
            "localhost:5000/a/b_c/d-e:v1",
            "[::1]:5000/r",
            "quay.io/openshift-release-dev/ocp-release@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "registry.example.com/r:t@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(parse_release_image(ok).as_deref(), Ok(ok), "{ok}");
        }
        for bad in [
            "",
            "quay.io/r:1\n  injected: true",
            "quay.io/r:1'",
            "quay.io/R:1",
            "quay.io/r:1 # comment",
            "quay.io/r@sha256:xyz",
            "quay.io//r",
            "-r",
            "quay.io/r:",
            "\"quay.io/r\"",
        ] {
            assert!(parse_release_image(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_risk_name_is_one_to_256_characters_without_spaces() {
        assert_eq!(
            parse_risk_name(" MinorUpdateWhileDeletionInProgress ").unwrap(),
            "MinorUpdateWhileDeletionInProgress"
        );
        assert!(parse_risk_name("").is_err());
        assert!(parse_risk_name("Two Words").is_err());
        assert!(parse_risk_name(&"x".repeat(257)).is_err());
        assert!(parse_risk_name(&"x".repeat(256)).is_ok());
    }
}
