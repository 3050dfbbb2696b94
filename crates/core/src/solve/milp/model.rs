//! The master problem as HiGHS sees it: rows (bounds and a name), columns (cost, bounds, integrality,
//! entries) and what each column stands for. The constraint families ([`super::families`]) add rows and
//! columns through [`Model`]; the master ([`super::master`]) owns one and adds the pattern columns.

use super::ids::{Class, Col, Config, Group, PatternId, Row, Target};

/// One new node: a configuration and how many pods of each class it holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Pattern {
    pub config: Config,
    /// (class, count), sorted by class, counts > 0.
    pub counts: Vec<(Class, u32)>,
    /// Rows the node itself enters with coefficient 1 because of a per-node rule, one list per kind of
    /// flag in family order (hostname spread: regime 1, fewer than mbar members; hostname affinity: the
    /// group's first-pod node). Derived from `config` and `counts` by the families' validation.
    pub flags: Vec<Vec<Row>>,
}

impl Pattern {
    /// How many pods of class `c` the node holds.
    pub fn count(&self, c: Class) -> u32 {
        count_of(&self.counts, c)
    }
}

/// How many pods of class `c` sorted counts hold.
pub fn count_of(counts: &[(Class, u32)], c: Class) -> u32 {
    counts.binary_search_by_key(&c, |x| x.0).map_or(0, |i| counts[i].1)
}

/// What a column stands for.
#[derive(Clone, Debug, PartialEq)]
pub enum ColKind {
    Pattern(PatternId),
    Assign {
        class: Class,
        target: Target,
    },
    Pending(Class),
    /// An auxiliary column of a constraint family (indicator binaries and minima), by its name.
    Aux(String),
    /// Aggregated relaxation only: nodes of a configuration.
    AggNodes(Config),
    /// Aggregated relaxation only: pods of a class on nodes of a configuration group.
    AggPods {
        class: Class,
        group: Group,
    },
}

#[derive(Clone, Debug)]
pub struct Column {
    pub cost: f64,
    pub lo: f64,
    pub hi: f64,
    pub integer: bool,
    pub entries: Vec<(Row, f64)>,
    pub kind: ColKind,
}

/// A row: its bounds and what it is (for diagnostics).
#[derive(Clone, Debug)]
pub struct RowDef {
    pub lo: f64,
    pub hi: f64,
    pub name: String,
}

pub const INF: f64 = f64::INFINITY;

/// Rows and columns in the order HiGHS gets them.
#[derive(Default)]
pub struct Model {
    rows: Vec<RowDef>,
    cols: Vec<Column>,
}

impl Model {
    pub fn rows(&self) -> &[RowDef] {
        &self.rows
    }

    pub fn cols(&self) -> &[Column] {
        &self.cols
    }

    pub fn row_def(&self, r: Row) -> &RowDef {
        &self.rows[r.ix()]
    }

    pub fn col(&self, j: Col) -> &Column {
        &self.cols[j.ix()]
    }

    pub fn col_mut(&mut self, j: Col) -> &mut Column {
        &mut self.cols[j.ix()]
    }

    pub fn n_rows(&self) -> usize {
        self.rows.len()
    }

    pub fn n_cols(&self) -> usize {
        self.cols.len()
    }

    /// Every column with its index.
    pub fn columns(&self) -> impl Iterator<Item = (Col, &Column)> {
        self.cols.iter().enumerate().map(|(j, c)| (Col::at(j), c))
    }

    /// A row without a name.
    pub fn row(&mut self, lo: f64, hi: f64) -> Row {
        self.named(String::new(), lo, hi)
    }

    pub fn named(&mut self, name: impl Into<String>, lo: f64, hi: f64) -> Row {
        self.rows.push(RowDef { lo, hi, name: name.into() });
        Row::at(self.rows.len() - 1)
    }

    pub fn add_col(&mut self, cost: f64, lo: f64, hi: f64, integer: bool, entries: Vec<(Row, f64)>, kind: ColKind) -> Col {
        self.cols.push(Column { cost, lo, hi, integer, entries, kind });
        Col::at(self.cols.len() - 1)
    }

    /// Appends entries (rows not yet in it) to column `j`.
    pub fn extend_col(&mut self, j: Col, entries: impl IntoIterator<Item = (Row, f64)>) {
        self.cols[j.ix()].entries.extend(entries);
    }

    /// An auxiliary column (no cost) named `name`.
    pub fn aux_col(&mut self, name: String, lo: f64, hi: f64, integer: bool, entries: Vec<(Row, f64)>) -> Col {
        self.add_col(0.0, lo, hi, integer, entries, ColKind::Aux(name))
    }

    /// The objective `Σ_j cost_j x_j` of a column vector.
    pub fn objective(&self, x: &[f64]) -> f64 {
        self.cols.iter().zip(x).map(|(c, v)| c.cost * v).sum()
    }

    /// Row activities of a full column vector; columns `skip` says to leave out count nothing.
    pub fn activities(&self, x: &[f64], skip: impl Fn(&Column, f64) -> bool) -> Vec<f64> {
        let mut act = vec![0.0; self.rows.len()];
        for (c, &v) in self.cols.iter().zip(x) {
            if skip(c, v) {
                continue;
            }
            for &(r, a) in &c.entries {
                act[r.ix()] += a * v;
            }
        }
        act
    }
}
