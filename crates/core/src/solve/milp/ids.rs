//! Typed indices of the MILP encoding. Each index space is its own type, so the compiler refuses a row
//! used as a column, a class used as a target, or a configuration used as its group:
//!
//! | type | indexes |
//! |---|---|
//! | [`Row`] | the master's rows (and a solution's row duals) |
//! | [`Col`] | the master's columns (and a solution's column values) |
//! | [`PatternId`] | the master's patterns |
//! | [`Class`] | pod classes (`Problem::classes`) |
//! | [`Target`] | existing nodes a class may use (`Structure::targets`; not node indices) |
//! | [`Group`] | configuration groups (`Problem::groups`) |
//! | [`Config`] | configurations (`Problem::configs`) |
//!
//! Per-family indices (a spread group, a hostname spread, an anti-affinity term, an affinity group) stay
//! inside their family's module.

macro_rules! index {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            /// The position in the vector this index space is stored in.
            #[inline]
            pub fn ix(self) -> usize {
                self.0 as usize
            }

            /// The index at position `i`.
            #[inline]
            pub fn at(i: usize) -> Self {
                $name(u32::try_from(i).expect("index fits in u32"))
            }

            /// Every index below `n`, in order.
            pub fn all(n: usize) -> impl Iterator<Item = Self> + Clone {
                (0..n).map(Self::at)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

index!(
    /// A row of the master.
    Row
);
index!(
    /// A column of the master.
    Col
);
index!(
    /// A pattern of the master (`Master::patterns`).
    PatternId
);
index!(
    /// A class of pending pods (`Problem::classes`).
    Class
);
index!(
    /// An existing node some class may use (`Structure::targets`).
    Target
);
index!(
    /// A configuration group (`Problem::groups`).
    Group
);
index!(
    /// A configuration (`Problem::configs`).
    Config
);

/// Where one pod is placed, for the rows that couple nodes: on a new node of a configuration group, or on
/// an existing target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Group(Group),
    Target(Target),
}
