//! `NAMESPACE/NAME`: how a namespaced object is named on a command line (a ServiceAccount, the
//! operator's own Deployment or Pod).

use std::fmt;

/// A namespaced object's namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamespacedName {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for NamespacedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A command-line value that is not `NAMESPACE/NAME`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not NAMESPACE/NAME (for example cluster-version/cvo-operator)")]
pub struct NotNamespacedName(pub String);

impl std::str::FromStr for NamespacedName {
    type Err = NotNamespacedName;

    /// Parses `NAMESPACE/NAME`.
    ///
    /// # Errors
    ///
    /// [`NotNamespacedName`] when either part is empty or there is not exactly one `/`.
    fn from_str(s: &str) -> Result<Self, NotNamespacedName> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(NamespacedName {
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(NotNamespacedName(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_namespace_slash_name_only() {
        let n: NamespacedName = "ns/dep".parse().unwrap();
        assert_eq!((n.namespace.as_str(), n.name.as_str()), ("ns", "dep"));
        assert_eq!(n.to_string(), "ns/dep");
        for bad in ["", "ns", "/n", "ns/", "a/b/c"] {
            assert!(bad.parse::<NamespacedName>().is_err(), "{bad:?}");
        }
    }
}
