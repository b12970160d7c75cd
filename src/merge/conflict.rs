//! Conflicts: a field that an apply would change while another manager owns it.

use crate::fieldpath::Path;
use std::fmt;

/// One conflicting path and the manager (identity) that owns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    /// Manager identity as kube-apiserver builds it (JSON of the entry without fields/time).
    pub manager: String,
    pub path: Path,
}

/// All conflicts of a rejected apply, sorted by manager identity, then path.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conflicts(pub Vec<Conflict>);

impl Conflicts {
    /// kube-apiserver's message order: managers by identity; each manager's paths in set
    /// order (a node's members before its children), as `ConflictsFromManagers` yields them.
    pub fn sort(&mut self) {
        self.0
            .sort_by(|a, b| a.manager.as_bytes().cmp(b.manager.as_bytes()));
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "conflict with {:?}: {}", c.manager, c.path)?;
        }
        Ok(())
    }
}
