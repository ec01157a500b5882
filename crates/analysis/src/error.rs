use std::fmt;

/// Why an analysis could not be done: the input does not allow it.
#[derive(Debug, Clone, PartialEq)]
pub enum AnalysisError {
    /// Fewer (distinct) points than the method needs.
    NotEnoughPoints {
        /// What the points are (e.g. "distinct concurrency levels").
        what: &'static str,
        needed: usize,
        got: usize,
    },
    /// A value is out of its domain (negative, not finite, unsorted...).
    InvalidInput(String),
}

impl fmt::Display for AnalysisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalysisError::NotEnoughPoints { what, needed, got } => {
                write!(f, "need at least {needed} {what}, got {got}")
            }
            AnalysisError::InvalidInput(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for AnalysisError {}

pub(crate) fn invalid(msg: impl Into<String>) -> AnalysisError {
    AnalysisError::InvalidInput(msg.into())
}

/// Refuses points with a NaN or infinite coordinate.
pub(crate) fn check_finite(points: &[(f64, f64)], what: &str) -> Result<(), AnalysisError> {
    if let Some((x, y)) = points
        .iter()
        .find(|(x, y)| !x.is_finite() || !y.is_finite())
    {
        return Err(invalid(format!("{what}: point ({x}, {y}) is not finite")));
    }
    Ok(())
}
