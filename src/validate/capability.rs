//! The capability annotation and catalogue (docs/capabilities.md): names a catalogue does not
//! know (rule `capability-unknown`; with a catalogue derived from the manifests, names that
//! differ from another only in case), empty or space-padded names (`capability-empty`), a
//! declared capability no set enables (`capability-in-no-set`), and, against `--previous`, an
//! object the update moves into a capability (`capability-moved`: clusters that have it and lack
//! the capability get it enabled implicitly).
//!
//! The annotation is read as the CVO reads it: split on `+`, nothing trimmed; any name the
//! catalogue does not know leaves the manifest out on every cluster
//! (`unrecognized capability names: …`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use crate::diagnostic::{Diagnostic, Location, Severity, excerpt};
use crate::release::capability::{CATALOGUE_FILE, SET_CURRENT, name_list};
use crate::release::{CAPABILITY_ANNOTATION, DeleteIntent, Manifest, ObjectId, Release};

use super::rules::{CAPABILITY_EMPTY, CAPABILITY_IN_NO_SET, CAPABILITY_MOVED, CAPABILITY_UNKNOWN};
use super::{finding, finding_at};

/// Largest edit distance (case folded) at which a known name is suggested for an unknown one.
const MAX_DISTANCE: usize = 2;

pub fn check(release: &Release) -> Vec<Diagnostic> {
    let mut out = empty_names(release);
    if release.capabilities.declared {
        out.extend(unknown_names(release));
        out.extend(in_no_set(release));
    } else {
        out.extend(case_twins(release));
    }
    out
}

/// A name as the CVO could ever know it: not empty, nothing around it.
fn well_formed(name: &str) -> bool {
    !name.is_empty() && name.trim() == name
}

/// The distinct well-formed names of a manifest, in the order written.
fn names(m: &Manifest) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    m.capabilities
        .iter()
        .map(String::as_str)
        .filter(|n| well_formed(n) && seen.insert(*n))
        .collect()
}

/// The catalogue file as messages name it: inside the release (`capabilities.yaml`,
/// `release-manifests/capabilities.yaml`), the same for a directory and an OCI artifact.
fn catalogue_name(release: &Release) -> String {
    let file = release
        .capabilities
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from(CATALOGUE_FILE));
    crate::diagnostic::escaped_path(file.strip_prefix(&release.root).unwrap_or(&file))
}

/// `A, B, C` (at most twenty, then how many more), or `none`.
fn list<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    let text = name_list(names.into_iter().map(String::as_str));
    if text.is_empty() {
        "none".to_owned()
    } else {
        text
    }
}

/// Rule `capability-empty`: a value with an empty name (`a++b`, a leading or trailing `+`) or
/// a name with spaces around it. An empty value (no capability) is fine.
fn empty_names(release: &Release) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for m in release.all_manifests() {
        let Some(value) = m.annotation(CAPABILITY_ANNOTATION) else {
            continue;
        };
        if value.is_empty() {
            continue;
        }
        let segments: Vec<&str> = value.split('+').collect();
        let empty = segments.iter().any(|s| s.trim().is_empty());
        let padded: Vec<&str> = segments
            .iter()
            .copied()
            .filter(|s| !s.trim().is_empty() && s.trim() != *s)
            .collect();
        if !empty && padded.is_empty() {
            continue;
        }
        let mut why = Vec::new();
        if empty {
            why.push(
                "it names an empty capability (two `+` in a row, or a `+` at the start or end)"
                    .to_owned(),
            );
        }
        for p in &padded {
            why.push(format!(
                "`{}` has spaces around it, so it is another capability than `{}`",
                excerpt(p),
                excerpt(p.trim())
            ));
        }
        let clean: Vec<&str> = segments
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        let help = if clean.is_empty() {
            format!(
                "write the capability names joined by single `+` with nothing around them, or remove `{CAPABILITY_ANNOTATION}` if the manifest belongs to no capability"
            )
        } else {
            format!(
                "write `{CAPABILITY_ANNOTATION}: \"{}\"` (names joined by single `+`, nothing around them)",
                excerpt(&clean.join("+"))
            )
        };
        out.push(finding(
            CAPABILITY_EMPTY,
            m,
            format!(
                "`{CAPABILITY_ANNOTATION}` is `{}`: {}; the CVO neither trims nor skips names, and no catalogue knows such a name, so this manifest is left out on every cluster",
                excerpt(value),
                why.join("; ")
            ),
            help,
        ));
    }
    out
}

/// Rule `capability-unknown` with a declared catalogue: a name it does not list.
fn unknown_names(release: &Release) -> Vec<Diagnostic> {
    let catalogue = &release.capabilities;
    let file = catalogue_name(release);
    let mut out = Vec::new();
    for m in release.all_manifests() {
        for name in names(m)
            .into_iter()
            .filter(|n| !catalogue.known.contains(*n))
        {
            let help = match closest(name, &catalogue.known) {
                Some(known) => format!(
                    "did you mean `{known}`? Capability names are case-sensitive; otherwise add `{}` to `known` in {} (and to the sets that should enable it)",
                    excerpt(name),
                    file
                ),
                None => format!(
                    "use a capability the catalogue lists, or add `{}` to `known` in {} (and to the sets that should enable it)",
                    excerpt(name),
                    file
                ),
            };
            out.push(finding(
                CAPABILITY_UNKNOWN,
                m,
                format!(
                    "capability `{}` is not in the release's catalogue {} (it knows {}): the CVO leaves this manifest out on every cluster (`unrecognized capability names: {}`)",
                    excerpt(name),
                    file,
                    list(&catalogue.known),
                    excerpt(name)
                ),
                help,
            ));
        }
    }
    out
}

/// The known name nearest to `name` (case folded), within [`MAX_DISTANCE`] and shorter than
/// the name itself; `None` when none is that close.
fn closest<'a>(name: &str, known: &'a BTreeSet<String>) -> Option<&'a str> {
    let folded = name.to_lowercase();
    let len = folded.chars().count();
    known
        .iter()
        // Lengths further apart than the distance allowed cannot be close: not compared.
        .filter(|k| k.chars().count().abs_diff(len) <= MAX_DISTANCE)
        .map(|k| (strsim::levenshtein(&folded, &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= MAX_DISTANCE && *d < folded.chars().count())
        .min_by_key(|(d, k)| (*d, k.as_str()))
        .map(|(_, k)| k.as_str())
}

/// Rule `capability-unknown` with a catalogue derived from the manifests (every name used is
/// known): a name that differs from another used name only in case, as a warning on the
/// manifests that use the less used spelling.
fn case_twins(release: &Release) -> Vec<Diagnostic> {
    // Per spelling: the manifests that use it.
    let mut users: BTreeMap<&str, Vec<&Manifest>> = BTreeMap::new();
    for m in release.all_manifests() {
        for name in names(m) {
            users.entry(name).or_default().push(m);
        }
    }
    let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for name in users.keys() {
        groups.entry(name.to_lowercase()).or_default().push(name);
    }
    let mut out = Vec::new();
    for spellings in groups.values().filter(|s| s.len() > 1) {
        // The most used spelling is taken as meant (ties: the first in sort order).
        let main = *spellings
            .iter()
            .max_by(|a, b| users[**a].len().cmp(&users[**b].len()).then(b.cmp(a)))
            .expect("two spellings or more");
        for other in spellings.iter().filter(|s| **s != main) {
            for m in &users[*other] {
                let mut d = finding(
                    CAPABILITY_UNKNOWN,
                    m,
                    format!(
                        "capability `{}` differs from `{}` (used by {} manifest{}) only in case: the CVO takes them as two capabilities, enabled apart",
                        excerpt(other),
                        excerpt(main),
                        users[main].len(),
                        if users[main].len() == 1 { "" } else { "s" }
                    ),
                    format!(
                        "write `{}` if the same capability is meant (names are case-sensitive)",
                        excerpt(main)
                    ),
                );
                d.severity = Severity::Warning;
                out.push(d);
            }
        }
    }
    out
}

/// Rule `capability-in-no-set`: a capability the catalogue declares that no set names, not
/// even `vCurrent` (implied as every known capability when the file does not declare it): no
/// baseline enables it, only `additionalEnabledCapabilities`.
fn in_no_set(release: &Release) -> Vec<Diagnostic> {
    let catalogue = &release.capabilities;
    let orphans: Vec<&String> = catalogue
        .known
        .iter()
        .filter(|c| !catalogue.sets.values().any(|s| s.contains(*c)))
        .collect();
    if orphans.is_empty() {
        return Vec::new();
    }
    // Only a declared catalogue leaves a capability in no set: it has a file (read again,
    // before the release's files are renamed, for the line of the name).
    let file = catalogue
        .file
        .clone()
        .unwrap_or_else(|| release.root.join(CATALOGUE_FILE));
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let mut gated: HashMap<&str, usize> = HashMap::new();
    for m in release.all_manifests() {
        for name in names(m) {
            *gated.entry(name).or_default() += 1;
        }
    }
    let sets: Vec<&String> = catalogue.sets.keys().collect();
    orphans
        .into_iter()
        .map(|c| {
            let location = Location {
                file: file.clone(),
                document: Some(0),
                line: Some(token_line(&text, c).unwrap_or(1)),
            };
            let n = gated.get(c.as_str()).copied().unwrap_or(0);
            finding_at(
                CAPABILITY_IN_NO_SET,
                location,
                format!(
                    "capability `{}` is in no capability set (sets: {}): no baselineCapabilitySet enables it, not even the default {SET_CURRENT}, so only clusters that list it in spec.capabilities.additionalEnabledCapabilities get its {n} manifest{}",
                    excerpt(c),
                    list(sets.iter().copied()),
                    if n == 1 { "" } else { "s" }
                ),
                format!(
                    "add `{}` to {SET_CURRENT} (and to the other sets that should enable it); leave {SET_CURRENT} out of `sets` to have it mean every known capability",
                    excerpt(c)
                ),
            )
        })
        .collect()
}

/// The one-based line where `name` first appears as a whole word in `text`.
fn token_line(text: &str, name: &str) -> Option<usize> {
    let part_of_name = |c: char| c.is_alphanumeric() || c == '_' || c == '-' || c == '.';
    text.lines()
        .position(|line| {
            line.match_indices(name).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + name.len()..].chars().next();
                !before.is_some_and(part_of_name) && !after.is_some_and(part_of_name)
            })
        })
        .map(|i| i + 1)
}

/// Rule `capability-moved`: an object the previous release applied without a capability that
/// this release gates behind it. One finding per object, naming both files.
pub fn check_update(release: &Release, previous: &Release) -> Vec<Diagnostic> {
    let before: HashMap<&ObjectId, &Manifest> = previous
        .manifests
        .iter()
        .filter(|m| m.intent == DeleteIntent::Apply)
        .map(|m| (&m.id, m))
        .collect();
    let mut out = Vec::new();
    for m in release
        .manifests
        .iter()
        .filter(|m| m.intent == DeleteIntent::Apply)
    {
        let Some(p) = before.get(&m.id) else {
            continue;
        };
        let added: Vec<&str> = names(m)
            .into_iter()
            .filter(|n| !p.capabilities.iter().any(|c| c == n))
            .collect();
        if added.is_empty() {
            continue;
        }
        let quoted = added
            .iter()
            .map(|n| format!("`{}`", excerpt(n)))
            .collect::<Vec<_>>()
            .join(", ");
        let (word, them) = if added.len() == 1 {
            ("capability", "it")
        } else {
            ("capabilities", "them")
        };
        out.push(finding(
            CAPABILITY_MOVED,
            m,
            format!(
                "the previous release applied this object without {word} {quoted} (at {}) and this release gates it behind {them}: on update, every cluster that has the object and does not enable {quoted} gets {them} enabled implicitly (ImplicitlyEnabledCapabilities=True), and an enabled capability is never disabled again",
                p.location
            ),
            "if clusters should keep the object, this is expected: say so in the release notes; otherwise ship the object under a new name in the capability and delete the old one with a delete manifest",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::capability::Catalogue;
    use crate::validate::testing::{manifest, release, rules};

    fn cm(file: &str, name: &str, caps: Option<&str>) -> Manifest {
        let annotations = caps
            .map(|c| format!("  annotations:\n    {CAPABILITY_ANNOTATION}: \"{c}\"\n"))
            .unwrap_or_default();
        manifest(
            file,
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: ns\n{annotations}"
            ),
        )
    }

    fn declared(mut r: Release, text: &str) -> Release {
        r.capabilities = Catalogue::parse(text).unwrap();
        r
    }

    fn derived(mut r: Release) -> Release {
        r.capabilities = Catalogue::derived(&r.manifests);
        r
    }

    #[test]
    fn unknown_names_with_a_declared_catalogue_suggest_the_near_one() {
        let r = declared(
            release(vec![
                cm("0000_50_a_00_a.yaml", "a", Some("Console")),
                cm("0000_50_a_01_b.yaml", "b", Some("Consle+Insights")),
                cm("0000_50_a_02_c.yaml", "c", Some("console")),
                cm("0000_50_a_03_d.yaml", "d", Some("Zebra")),
                cm("0000_50_a_04_e.yaml", "e", None),
                cm("0000_50_a_05_f.yaml", "f", Some("")),
            ]),
            "known: [Console, Insights]\n",
        );
        let found = check(&r);
        assert_eq!(rules(&found), [CAPABILITY_UNKNOWN; 3], "{found:#?}");
        assert!(found.iter().all(|d| d.severity == Severity::Error));
        assert!(
            found[0].message.contains("`Consle`"),
            "{}",
            found[0].message
        );
        assert!(
            found[0]
                .message
                .contains("unrecognized capability names: Consle")
        );
        assert!(
            found[0]
                .help
                .as_deref()
                .unwrap()
                .starts_with("did you mean `Console`?"),
            "{:?}",
            found[0].help
        );
        assert!(
            found[1]
                .help
                .as_deref()
                .unwrap()
                .starts_with("did you mean `Console`?")
        );
        assert!(
            found[2]
                .help
                .as_deref()
                .unwrap()
                .starts_with("use a capability")
        );
        assert_eq!(found[2].object.as_ref().unwrap().name, "d");
    }

    #[test]
    fn case_twins_with_a_derived_catalogue_are_warnings_on_the_rarer_spelling() {
        let r = derived(release(vec![
            cm("0000_50_a_00_a.yaml", "a", Some("Console")),
            cm("0000_50_a_01_b.yaml", "b", Some("Console")),
            cm("0000_50_a_02_c.yaml", "c", Some("console+Insights")),
            cm("0000_50_a_03_d.yaml", "d", Some("Insights")),
        ]));
        let found = check(&r);
        assert_eq!(rules(&found), [CAPABILITY_UNKNOWN]);
        assert_eq!(found[0].severity, Severity::Warning);
        assert_eq!(found[0].object.as_ref().unwrap().name, "c");
        assert!(
            found[0]
                .message
                .contains("`console` differs from `Console` (used by 2 manifests)")
        );
        // Every name distinct: nothing to say.
        let r = derived(release(vec![cm("0000_50_a_00_a.yaml", "a", Some("A+B"))]));
        assert!(check(&r).is_empty());
    }

    #[test]
    fn empty_and_padded_names() {
        let r = derived(release(vec![
            cm("0000_50_a_00_a.yaml", "a", Some("a++b")),
            cm("0000_50_a_01_b.yaml", "b", Some("+a")),
            cm("0000_50_a_02_c.yaml", "c", Some("a+")),
            cm("0000_50_a_03_d.yaml", "d", Some(" Console")),
            cm("0000_50_a_04_e.yaml", "e", Some("+")),
            cm("0000_50_a_05_f.yaml", "f", Some("a+b")),
            cm("0000_50_a_06_g.yaml", "g", Some("")),
        ]));
        let found = check(&r);
        assert_eq!(rules(&found), [CAPABILITY_EMPTY; 5], "{found:#?}");
        assert!(found[0].message.contains("empty capability"));
        assert_eq!(
            found[0].help.as_deref(),
            Some(
                "write `capability.openshift.io/name: \"a+b\"` (names joined by single `+`, nothing around them)"
            )
        );
        assert!(found[3].message.contains("` Console` has spaces around it"));
        assert!(found[4].help.as_deref().unwrap().contains("remove"));
    }

    #[test]
    fn a_declared_capability_in_no_set() {
        let r = declared(
            release(vec![cm("0000_50_a_00_a.yaml", "a", Some("B"))]),
            "known: [A, B]\nsets:\n  vCurrent: [A]\n",
        );
        let found = check(&r);
        assert_eq!(rules(&found), [CAPABILITY_IN_NO_SET]);
        assert!(found[0].message.contains("`B` is in no capability set"));
        assert!(found[0].message.contains("its 1 manifest"));
        assert!(found[0].object.is_none());
        // vCurrent implied: every known capability is in it.
        let r = declared(release(vec![]), "known: [A, B]\nsets:\n  v1: [A]\n");
        assert!(check(&r).is_empty());
    }

    #[test]
    fn token_lines() {
        let text = "known:\n- ConsoleX\n- Console\nsets:\n  vCurrent: [Console]\n";
        assert_eq!(token_line(text, "Console"), Some(3));
        assert_eq!(token_line(text, "Nope"), None);
    }

    #[test]
    fn an_object_moved_into_a_capability() {
        let previous = release(vec![
            cm("p/0000_50_a_00_a.yaml", "a", None),
            cm("p/0000_50_a_01_b.yaml", "b", Some("A")),
            cm("p/0000_50_a_02_c.yaml", "c", Some("A")),
        ]);
        let new = release(vec![
            cm("n/0000_50_a_00_a.yaml", "a", Some("A+B")),
            cm("n/0000_50_a_01_b.yaml", "b", Some("A")),
            cm("n/0000_50_a_02_c.yaml", "c", None),
            cm("n/0000_50_a_03_d.yaml", "d", Some("B")),
        ]);
        let found = check_update(&new, &previous);
        assert_eq!(rules(&found), [CAPABILITY_MOVED]);
        let d = &found[0];
        assert_eq!(d.object.as_ref().unwrap().name, "a");
        assert!(d.message.contains("capabilities `A`, `B`"), "{}", d.message);
        assert!(d.message.contains("p/0000_50_a_00_a.yaml"), "{}", d.message);
        assert_eq!(
            d.location.file,
            std::path::Path::new("n/0000_50_a_00_a.yaml")
        );
    }
}
